"""Poisson: matrix-free conjugate gradient for -Laplace(u) = f on the unit square."""
from hpclab.kernels.registry import INT_MAX, Kernel, Metric, Param

KERNEL = Kernel(
    slug="poisson",
    title="Poisson",
    summary="conjugate-gradient solves of the 2D Poisson problem, the time of one iteration "
            "split into matrix-vector product, halo, reductions and vector updates",
    teaches=("matrix-free conjugate gradient: report 000's convergence study reproduced, one "
             "iteration predicted from STREAM and PingPong, strong scaling, superlinear speed-ups "
             "from the cache"),
    implementations=("c", "cython", "python"),
    params=(
        Param("n", "int", "Interior mesh points per dimension (the mesh is n x n, h = 1/(n+1)).",
              default=64, low=1, high=46340),
        Param("interleave", "bool", "Update the rows that need no halo while the halo rows "
              "are in flight.", default=True),
        Param("iterations", "int", "Stop after this many iterations even if not converged "
              "(0: until ||r|| <= 1e-6 ||r0||).", default=0, low=0, high=INT_MAX),
        Param("repetitions", "int", "Solves, each from x0 = 0.", default=1, low=1),
    ),
    metrics=(Metric("iteration", "s", "seconds per iteration, wall clock between barriers"),
             Metric("matvec", "s", "seconds per iteration in q = A p, halo included, the "
                    "slowest rank's"),
             Metric("halo", "s", "of which starting and waiting for the halo rows"),
             Metric("reduce", "s", "seconds per iteration in the two MPI_Allreduce"),
             Metric("update", "s", "seconds per iteration in the three vector updates"),
             Metric("iterations", "count", "CG iterations of the solve"),
             Metric("residual", "1", "||r_k|| / ||r_0|| when it stopped"),
             Metric("error", "1", "max |u - u_h| over the mesh points"),
             Metric("rss", "B", "VmRSS summed over the ranks after the solve"),
             Metric("rss_base", "B", "VmRSS summed over the ranks before the vectors")),
    # -fopenmp-simd lets the inner products of the fused loops run in vector lanes (#pragma
    # omp simd); with the building CPU's vector width (-march=native) the updates, 72 of an
    # iteration's 88 bytes, took 2.7 ms instead of 4.4 and an iteration 4.4 ms instead of
    # 6.2 (N = 2048, 2 ranks of a 2-core AMD EPYC with AVX-512, two runs a minute apart);
    # HPCLAB_MARCH chooses another target (setup.py, README)
    cflags=("-fopenmp-simd", "-march=native"),
    min_procs=1,
    default_procs="cores",
    check_procs=(1, 2, 3, 4),
    extra={
        # memory traffic per point and iteration of the fused loops: q = A p and p.q (read
        # p, write q), x += a p and r -= a q with r.r (read x, r, p, q, write x, r), p = r +
        # b p (read r, p, write p); write-allocate adds a read of q's lines
        "bytes_per_point": 88, "bytes_per_point_write_allocate": 96,
        "vectors": 4, "tolerance": 1e-6,
    },
    profiles={
        # convergence: N of the study (full solves, C); strong: N of the strong scaling
        # (time per iteration over `iterations` iterations); compare: the implementations;
        # simulated: N, rank counts and iterations of the simulated cluster (hpclab.simulate)
        "quick": {"convergence": [16, 32, 64], "strong": [64], "iterations": 40,
                  "compare": 64, "repetitions": 3, "check_upto": 4, "timeout": 60,
                  "simulated": {"n": 512, "ranks": [1, 2, 4, 8, 16, 32, 48, 96],
                                "iterations": 5}},
        "standard": {"convergence": [32, 64, 128, 256, 512, 1024], "strong": [256, 1024, 2048],
                     "iterations": 100, "compare": 512, "repetitions": 3, "check_upto": 4,
                     "timeout": 600,
                     "simulated": {"n": 4096, "ranks": [1, 2, 4, 8, 16, 32, 48, 96, 192],
                                   "iterations": 10}},
        "full": {"convergence": [32, 64, 128, 256, 512, 1024, 2048, 4096],
                 "strong": [256, 1024, 4096], "iterations": 200, "compare": 1024,
                 "repetitions": 5, "check_upto": 8, "timeout": 7200,
                 "simulated": {"n": 4096, "ranks": [1, 2, 4, 8, 16, 32, 48, 96, 192],
                               "iterations": 20}},
    },
    inputs={"pingpong": "Hockney's λ and B, the C kernel's line through every size",
            "stream": "add bandwidth per thread count, best trial, close binding"},
    lab_needs="1 .. cores for timings, 4 engines for its checks",
)
