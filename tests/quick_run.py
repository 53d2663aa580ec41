"""A chapter's records from ``mpiexec -n 2 python -m hpclab run <slug> --profile quick``, the
run the chapters' CLI tests share."""
import sys

from hpclab import launch, records


def records_of(tmp_path_factory, slug, n=2, timeout=300):
    """(records, metadata) of one quick run of ``slug`` on n ranks, in a fresh folder; the
    run's output in the failure message when it saved nothing."""
    out = tmp_path_factory.mktemp(slug)
    r = launch.mpirun([sys.executable, "-m", "hpclab", "run", slug, "--profile", "quick",
                       "--out", str(out), "--quiet"], n=n, timeout=timeout,
                      what=f"{slug} CLI")
    csvs = list(out.glob(f"{slug}-*.csv"))
    assert len(csvs) == 1, r.stdout + r.stderr
    return records.load(csvs[0])
