import sys

from hpclab.cli import main

sys.exit(main())
