# make mpilibs: each MPI library from its package into .mpilibs/<library> (none of it in
# .venv), the chapter's C program built by that library's mpicc, then the sweep into results/
.PHONY: mpilibs
mpilibs: $(STAMP)
	$(BIN)/python -m hpclab.chapters.mpilibs.sweep --profile $(PROFILE)

help::
	@echo "make mpilibs   MPICH, Open MPI and Intel MPI in .mpilibs/, measured side by side (PROFILE=...)"

DISTCLEAN_MORE += .mpilibs
