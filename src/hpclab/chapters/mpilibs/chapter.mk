# make mpilibs: each MPI library from its package into .mpilibs/<library> (none of it in
# .venv), the chapter's C program built by that library's mpicc, then the sweep into results/
.PHONY: mpilibs
mpilibs: $(STAMP)
	$(BIN)/python -m hpclab.chapters.mpilibs.sweep --profile $(PROFILE)

# make test: the libraries set up without the sweep (the suite runs its own); MPILIBS=skip
# leaves them as they are. Without any, the tests of this chapter's lab and page that measure
# are skipped, or fail where HPCLAB_REQUIRE_READY is set (as in CI)
MPILIBS ?= setup
test-needs:: $(STAMP)
ifneq ($(MPILIBS),skip)
	@mkdir -p build; $(BIN)/python -m hpclab.chapters.mpilibs.libraries \
	  > build/mpilibs-setup.log 2>&1 && grep -h "is skipped\|ready:" build/mpilibs-setup.log \
	  || { cat build/mpilibs-setup.log; echo "no MPI library could be set up: the tests of the" \
	       "MPI libraries' lab and page that measure are skipped, or fail where" \
	       "HPCLAB_REQUIRE_READY is set (as in CI)"; }
endif

help::
	@echo "make mpilibs   MPICH, Open MPI and Intel MPI in .mpilibs/, measured side by side (PROFILE=...)"

DISTCLEAN_MORE += .mpilibs
