# hpclab: `make book` builds the site, `make test` runs what CI runs.
# Every target creates .venv and builds the kernels first when needed (no root, no conda,
# no system MPI: MPI comes from the `mpich` package unless MPI=system).

PYTHON  ?= python3
VENV    ?= .venv
MPI     ?= mpich
PROFILE ?= standard
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.hpclab-built
KERNEL_SOURCES := $(wildcard src/hpclab/kernels/*/*.c src/hpclab/kernels/*/*.h src/hpclab/kernels/*/*.pyx \
  src/hpclab/kernels/*/*.pxd src/hpclab/chapters/*/kernels/*.c src/hpclab/chapters/*/kernels/*.h \
  src/hpclab/chapters/*/kernels/*.pyx)
ifeq ($(MPI),system)
EXTRAS  := lab,book,test
MPI_PKG :=
else
EXTRAS  := mpich,lab,book,test
MPI_PKG := mpich
endif

# the environment's mpicc and mpiexec come first
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: setup book lab bench clean distclean help
# >>> instructors (left out of a student release: make student-release)
.PHONY: lint test test-needs test-openmpi release grade export report roster duedate formgrader readme import-zip \
  hub hub-release hub-grade labtimes student-release
# <<< instructors

# help:: (double-colon) so that a chapter's chapter.mk adds its own lines after these
help::
	@echo "make book      build the site (measures this machine; PROFILE=quick|standard|full)"
	@echo "make lab       open the lab notebooks in JupyterLab"
	@echo "make bench     our kernels and outside references side by side (see README)"
	@echo "make setup     only create .venv and build the kernels (MPI=system: use your mpicc)"
# >>> instructors (left out of a student release: make student-release)
help::
	@echo "make test      run the lint and the test suite (what CI runs)"
	@echo "make lint      ruff (style, likely bugs, import order) and mypy (types), as configured in pyproject.toml"
	@echo "make release   regenerate labs/ from solutions/ (instructors)"
	@echo "make grade     autograde new or changed submissions in autograder/submitted/<student>/<lab>"
	@echo "               (LAB=<lab> STUDENT=<id>: only those; FORCE=1: grade again;"
	@echo "               JOBS=N: N side by side, default one per core) (instructors)"
	@echo "make export    grades.csv and grades-lms.csv from the gradebook, running nothing"
	@echo "make report    the class report (autograder/class-report.html)"
	@echo "make roster ROSTER=students.csv   names and emails (id,first_name,last_name,email)"
	@echo "make duedate LAB=<lab> DUE='2026-12-01 17:00:00 Europe/Rome'   a lab's due date"
	@echo "make import-zip LAB=<lab> ZIP=<export.zip> [LMS=canvas|moodle|folders]   an LMS's submissions"
	@echo "make hub [DEMO=1] [PORT=8000]   the course on JupyterHub on this machine (as root)"
	@echo "make hub-release LAB=<lab>   release a lab to the hub's students"
	@echo "make hub-grade LAB=<lab>   collect, grade and release feedback of a lab on the hub"
	@echo "make formgrader  open nbgrader's formgrader on this course (manual grading)"
	@echo "make readme    the README's list of chapters, from their declarations"
	@echo "make labtimes  how long each lab's cells take on this machine (PROFILE=standard)"
	@echo "make test-openmpi  the kernel, CLI and launch tests again under the system's Open MPI"
	@echo "make student-release DEST=<folder>  what students get: no solutions, hidden tests or grading"
# <<< instructors

setup: $(STAMP)

# the kernels' target CPU and optimisation (HPCLAB_MARCH, HPCLAB_OPT, see README): a change
# rebuilds them
MARCH_FILE := $(VENV)/.hpclab-march
BUILD_FLAGS := $(strip $(HPCLAB_MARCH) $(HPCLAB_OPT))
$(shell mkdir -p $(VENV) && { test -f $(MARCH_FILE) && [ "$$(cat $(MARCH_FILE))" = "$(BUILD_FLAGS)" ] \
  || echo "$(BUILD_FLAGS)" > $(MARCH_FILE); })

$(STAMP): pyproject.toml setup.py $(KERNEL_SOURCES) $(MARCH_FILE)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
	  { echo "hpclab needs Python >= 3.10; $(PYTHON) is $$($(PYTHON) --version)."; \
	    echo "Run with PYTHON=/path/to/python3.x"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || \
	  { echo "cannot create $(VENV): install the venv module (Debian/Ubuntu: apt-get install python3-venv)"; exit 1; }
	@# an older checkout's kernel folders (src/hpclab/kernels/<slug>, now in chapters/): only
	@# their untracked build products are left, which would shadow nothing but confuse imports
	@for d in src/hpclab/kernels/*/; do test -e "$${d}__init__.py" || rm -rf "$$d"; done
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "setuptools>=77" "cython>=3" "mpi4py>=4" "numpy>=1.24" $(MPI_PKG)
	$(BIN)/python -m pip install -q --no-build-isolation -e ".[$(EXTRAS)]"
	$(BIN)/python -c "from hpclab.kernels.registry import import_all; import_all()"
	@touch $@

# Jupyter Book's execution cache knows a page's code cells only: when the package, the
# reference data or the profile change, the pages must run again rather than show what the
# previous code computed. The same key names the build (HPCLAB_BUILD): the pages of one build,
# run again or read from the cache, share its measurements (hpclab.inputs)
BOOK_KEY = $$( { echo $(PROFILE); git ls-files -z src/hpclab book/data/reference book/_ext \
  | xargs -0 cat 2>/dev/null; } | sha256sum | cut -c1-16)

book: $(STAMP)
	@key=$(BOOK_KEY); if [ "$$(cat _build/.hpclab-book-key 2>/dev/null)" != "$$key" ]; then \
	  rm -rf _build/.jupyter_cache; mkdir -p _build; echo "$$key" > _build/.hpclab-book-key; \
	  echo "package, data or profile changed: every page runs again"; fi
	HPCLAB_PROFILE=$(PROFILE) HPCLAB_BUILD=$$(cat _build/.hpclab-book-key) \
	  $(BIN)/jupyter-book build --all -W -n --keep-going .
	@echo "The book is at file://$(CURDIR)/_build/html/index.html"

# >>> instructors (left out of a student release: make student-release)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

# three pytest workers (pytest-xdist) whatever the cores: part of the suite waits on engines,
# kernels and browsers rather than computing, so three side by side finish sooner even on two
# cores; a fourth made every long test about a quarter slower and the run no shorter (fresh
# clones on two cores: 22.5 and 24.8 min with four, 23.7 and 23.9 with three; TEST_WORKERS=0:
# one process). The workers take whole files, the longest first (tests/conftest.py).
TEST_WORKERS ?= 3
# The suite's MPI ranks sleep between polls while they wait (MPICH's heavy yield, Open MPI's
# yield when idle) unless told otherwise: by default a waiting rank polls at full speed, and on
# two cores shared by three workers it holds a core the rank it waits for needs (the three
# wrong-answer files of the second half: 185 s alone on two cores, 177 s with it and ten more
# cases). It makes a message slower (4 to 96 us one way), so it is never a timed run's setting:
# the suite runs the quick profile, whose timings mean nothing. Its OpenMP threads sleep
# while they wait too (OMP_WAIT_POLICY=passive): ranks of two threads each, three workers
# side by side, and a spinning thread holds a core the others need
YIELD_ENV := MPIR_CVAR_ENABLE_HEAVY_YIELD=$${MPIR_CVAR_ENABLE_HEAVY_YIELD:-1} \
  OMPI_MCA_mpi_yield_when_idle=$${OMPI_MCA_mpi_yield_when_idle:-1} \
  OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive}
# what the suite needs of a chapter beyond the package, set up before it: a chapter's
# chapter.mk adds its own recipe (test-needs::); what cannot be set up (offline, say) is said,
# and the tests that need it are skipped with the reason (hpclab.chapters.unready)
test-needs::
	@:
# ruff first (a second); mypy (a minute from a fresh clone's empty cache, mostly waiting on
# the disk and on the other processes) runs beside the suite and is shown after it: make test
# fails when either fails. A failure shows its assertion's message and the lines that led
# to it (--tb=short), so that a log cut to its first and last lines still says what failed
test: $(STAMP)
	$(BIN)/ruff check .
	@$(MAKE) --no-print-directory test-needs
	mkdir -p build; $(BIN)/mypy > build/mypy.log 2>&1 & mypy=$$!; \
	$(YIELD_ENV) HPCLAB_PROFILE=quick $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile \
	  --no-loadscope-reorder --tb=short; status=$$?; \
	wait $$mypy; typed=$$?; echo "=== mypy (beside the tests): exit $$typed ==="; \
	cat build/mypy.log; [ $$typed -eq 0 ] || exit $$typed; exit $$status

# The kernel, CLI and launch tests against the system's Open MPI (Debian: openmpi-bin
# libopenmpi-dev). The kernels are built in place, so this builds a copy of the sources in
# build/openmpi with an environment of its own: .venv keeps its MPI.
OMPI_DIR ?= build/openmpi
# Its kernels are built without the optimiser (HPCLAB_OPT=-O0, see setup.py): they are checked
# here, not timed, and the build took two of the run's CPU minutes at -O3, beside the suite.
# (not test_packaging.py: setup.py's messages and flags are the same whatever the MPI, and
# this target's own make setup MPI=system is the build it would check)
OMPI_TESTS := tests/test_kernels.py tests/test_launch.py \
  tests/test_pingpong.py::test_cli_writes_csv_and_json_records
# the engines' restart paths are ipyparallel's whatever the MPI: run once, under make test
OMPI_SKIP := not (named_engines_again or engines_deadlock_times_out or interrupting_a_stuck \
  or controller_still_counts or killed_engines_left)
test-openmpi:
	@command -v mpicc.openmpi >/dev/null || { echo "Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev)"; exit 1; }
	mkdir -p $(OMPI_DIR)
	git ls-files -z --cached --others --exclude-standard | \
	  tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C $(OMPI_DIR)
	HPCLAB_OPT=-O0 $(MAKE) -C $(OMPI_DIR) setup MPI=system EXTRAS=test MPICC=$$(command -v mpicc.openmpi)
	cd $(OMPI_DIR) && PATH=$(abspath $(OMPI_DIR))/.venv/bin:$$PATH $(YIELD_ENV) \
	  MPIEXEC=$$(command -v mpiexec.openmpi) HPCLAB_PROFILE=quick \
	  .venv/bin/python -m pytest -p no:cacheprovider $(OMPI_TESTS) -k "$(OMPI_SKIP)"
# <<< instructors

# JupyterLab refuses to start as root unless told; containers and lab machines often are root
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(STAMP)
	@$(if $(ALLOW_ROOT),echo "running as root (a container?): starting JupyterLab with --allow-root")
	$(BIN)/jupyter lab labs/ $(ALLOW_ROOT)

# >>> instructors (left out of a student release: make student-release)
release: $(STAMP)
	$(BIN)/python autograder/grade.py release

GRADE := $(BIN)/python autograder/grade.py
grade: $(STAMP)
	$(GRADE) grade $(LAB) $(foreach s,$(STUDENT),--student $(s)) $(if $(FORCE),--force) \
	  $(if $(JOBS),--jobs $(JOBS))

export: $(STAMP)
	$(GRADE) export

report: $(STAMP)
	$(GRADE) report

roster: $(STAMP)
	@test -n "$(ROSTER)" || { echo "make roster ROSTER=students.csv (columns id,first_name,last_name,email)"; exit 1; }
	$(GRADE) roster "$(abspath $(ROSTER))"

duedate: $(STAMP)
	@test -n "$(LAB)" -a -n "$(DUE)" || { echo "make duedate LAB=<lab> DUE='2026-12-01 17:00:00 Europe/Rome'"; exit 1; }
	$(GRADE) duedate $(LAB) "$(DUE)"

# an LMS's export of one lab's submissions (ZIP=file.zip; LMS=canvas|moodle|folders)
import-zip: $(STAMP)
	@test -n "$(LAB)" -a -n "$(ZIP)" || { echo "make import-zip LAB=<lab> ZIP=<export.zip> [LMS=canvas|moodle|folders]"; exit 1; }
	$(GRADE) import-zip $(LAB) "$(abspath $(ZIP))" $(if $(LMS),--lms $(LMS))

# a course on JupyterHub on this machine (as root): hub/hub.py; DEMO=1 makes demo accounts
HUB_PORT ?= $(or $(PORT),8000)
hub: $(STAMP)
	@$(BIN)/python -c "import jupyterhub, jupyterhub_idle_culler" 2>/dev/null || \
	  $(BIN)/python -m pip install -q --no-build-isolation -e ".[$(EXTRAS),hub]"
	$(BIN)/python hub/hub.py start --port $(HUB_PORT) $(if $(DEMO),--demo)

# generate LAB into the course's gradebook and release it to the hub's students
hub-release: $(STAMP)
	@test -n "$(LAB)" || { echo "make hub-release LAB=<lab>"; exit 1; }
	$(BIN)/python hub/hub.py release $(LAB)

# collect, grade (the same grader as make grade) and release the feedback of LAB on the hub
hub-grade: $(STAMP)
	@test -n "$(LAB)" || { echo "make hub-grade LAB=<lab>"; exit 1; }
	$(BIN)/python hub/hub.py grade $(LAB)

# formgrader reads nbgrader_config.py from its working folder: start it in autograder/, with
# the repository as the server's root (the course must lie inside it)
formgrader: $(STAMP)
	@$(if $(ALLOW_ROOT),echo "running as root (a container?): starting JupyterLab with --allow-root")
	cd $(CURDIR)/autograder && $(abspath $(BIN))/jupyter lab --ServerApp.root_dir=$(CURDIR) \
	  --LabApp.default_url=/formgrader $(ALLOW_ROOT)

# the README's list of chapters, from the chapters' declarations (a test checks it is current)
readme: $(STAMP)
	$(BIN)/python -c "from hpclab import chapters; chapters.write_readme('README.md')"

# what students get (DEST=<folder>): this repository without solutions, hidden tests, the
# grading or the test suite; this README and Makefile without their instructors' parts
student-release:
	@test -n "$(DEST)" || { echo "make student-release DEST=<folder outside this repository>"; exit 1; }
	$(PYTHON) autograder/student_release.py "$(DEST)"

# how long each lab's cells take here, in the default profile (a timing: never a test)
labtimes: $(STAMP)
	$(BIN)/python autograder/labtimes.py --profile $(PROFILE)
# <<< instructors

# a chapter's own targets (its chapter.mk: a target named for the chapter, its help lines
# under help::, its folders to remove in DISTCLEAN_MORE)
include $(wildcard src/hpclab/chapters/*/chapter.mk)

# every kernel's bench, then grading's where the grader is (a generated class of 40 correct
# submissions, one at a time and side by side); references given on the command line (make
# bench OSU=... IMB=... STREAM_C=...) reach it through the environment
bench: $(STAMP)
	$(BIN)/python -m hpclab.bench
	@if [ -f autograder/bench.py ]; then $(BIN)/python autograder/bench.py; fi

clean:
	rm -rf _build build src/*.egg-info autograder/autograded autograder/feedback autograder/grades.csv \
	  autograder/grades-lms.csv autograder/class-report.html
	find src -name '__pycache__' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(OMPI_DIR) $(DISTCLEAN_MORE) results src/hpclab/kernels/*/*.so \
  src/hpclab/chapters/*/kernels/*.so src/hpclab/kernels/build_info.json
