"""The Amdahl lab's common wrong answers (see tests/wrong_answers/__init__.py)."""
from wrong_answers import case, judged_term_cases

# the solution's (a): scatter, add, gather
COLLECTIVES = """    comm.Scatterv(send(A), a, root=0)
    comm.Scatterv(send(B), b, root=0)
    c = a + b
    C = np.empty((nx, ny, nz)) if rank == 0 else None
    comm.Gatherv(c, [C, counts, displs, MPI.DOUBLE] if rank == 0 else None, root=0)"""

# the solution's (k): the interpreter's cost, the prediction from it, its share
INTERP = ('np.median(am.work_seconds(tiny_df, "python", P_top, TINY))\n'
          '                 - np.median(am.work_seconds(tiny_df, "c", P_top, TINY))')
PREDICT = 'float(np.median(am.work_seconds(df, "c", P_top, SHAPE)) + interp_s)'
SHARE = 'interp_share = interp_s / float(np.median(am.work_seconds(df, "c", P_top, SHAPE)))'

WRONG = [
    case("counts and displacements in planes", "test_distributed_add", "in elements, not planes",
         ("distributed_add", "counts = [n * plane for _, n in blocks]",
          "counts = [n for _, n in blocks]"),
         ("distributed_add", "displs = [o * plane for o, _ in blocks]",
          "displs = [o for o, _ in blocks]")),
    case("planes split without the remainder", "test_distributed_add", "its block of the",
         ("distributed_add", "blocks = [block_range(nx, size, r) for r in range(size)]",
          "blocks = [(r * (nx // size), nx // size) for r in range(size)]")),
    case("rank 0 adds everything alone", "test_distributed_add", "rank 0 adding everything",
         ("distributed_add", COLLECTIVES,
          """    C = A + B if rank == 0 else None""")),
    case("point-to-point messages for (a)", "test_distributed_add", "collectives",
         ("distributed_add", COLLECTIVES,
          """    o, n = blocks[rank]
    if rank == 0:
        A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
        for r in range(1, size):
            ro, rn = blocks[r]
            comm.Send(A[ro:ro + rn], dest=r, tag=1)
            comm.Send(B[ro:ro + rn], dest=r, tag=2)
        a[...], b[...] = A[o:o + n].ravel(), B[o:o + n].ravel()
    else:
        comm.Recv(a, source=0, tag=1)
        comm.Recv(b, source=0, tag=2)
    c = a + b
    C = np.empty((nx, ny, nz)) if rank == 0 else None
    if rank == 0:
        C[o:o + n] = c.reshape(n, ny, nz)
        for r in range(1, size):
            ro, rn = blocks[r]
            comm.Recv(C[ro:ro + rn], source=r, tag=3)
    else:
        comm.Send(c, dest=0, tag=3)""")),
    case("boxes sent as contiguous copies, without a datatype", "test_cartesian_add",
         "no send or receive was given a derived datatype",
         ("cartesian_add", """            cart.Send([A, 1, t], dest=r, tag=1)
            cart.Send([B, 1, t], dest=r, tag=2)""",
          """            part = tuple(slice(o, o + n) for o, n in zip(*box(r)))
            cart.Send(np.ascontiguousarray(A[part]), dest=r, tag=1)
            cart.Send(np.ascontiguousarray(B[part]), dest=r, tag=2)"""),
         ("cartesian_add", """            cart.Recv([C, 1, t], source=r, tag=3)""",
          """            part = tuple(slice(o, o + n) for o, n in zip(*box(r)))
            got = np.empty(box(r)[1])
            cart.Recv(got, source=r, tag=3)
            C[part] = got""")),
    case("a box sent plane by plane", "test_cartesian_add", "one message",
         ("cartesian_add", """            t = block_type(r)
            cart.Send([A, 1, t], dest=r, tag=1)
            cart.Send([B, 1, t], dest=r, tag=2)
            t.Free()
    else:
        cart.Recv(a, source=0, tag=1)
        cart.Recv(b, source=0, tag=2)""",
          """            (s0, s1, s2), (n0, n1, n2) = box(r)
            for i in range(n0):
                cart.Send(np.ascontiguousarray(A[s0 + i, s1:s1 + n1, s2:s2 + n2]), dest=r,
                          tag=1)
                cart.Send(np.ascontiguousarray(B[s0 + i, s1:s1 + n1, s2:s2 + n2]), dest=r,
                          tag=2)
    else:
        for i in range(counts[0]):
            cart.Recv(a[i], source=0, tag=1)
            cart.Recv(b[i], source=0, tag=2)""")),
    case("boxes without the remainder", "test_cartesian_add", "n % d",
         ("cartesian_add",
          "ranges = [block_range(n, d, c) for n, d, c in zip(shape, dims, cart.Get_coords(r))]",
          "ranges = [(c * (n // d), n // d) for n, d, c in zip(shape, dims, "
          "cart.Get_coords(r))]")),
    case("a 3D grid whatever ndims asks for", "test_cartesian_add", "grid 4x1x1",
         ("cartesian_add", "dims = MPI.Compute_dims(comm.Get_size(), ndims) + [1] * (3 - ndims)",
          "dims = MPI.Compute_dims(comm.Get_size(), 3)")),
    case("rank 0 forgets its own box", "test_cartesian_add", "rank 0's own block",
         ("cartesian_add", "a[...], b[...] = A[own], B[own]", "pass")),
    case("the subarray in Fortran order", "test_cartesian_add", "C order",
         ("cartesian_add", "Create_subarray(shape, counts, starts)",
          "Create_subarray(shape, counts, starts, order=MPI.ORDER_FORTRAN)")),
    case("16 bytes per element", "test_prediction", "writes c",
         ("prediction", "{P: 24 * N", "{P: 16 * N")),
    case("32 bytes per element (write-allocate)", "test_prediction", "24 bytes per",
         ("prediction", "{P: 24 * N", "{P: 32 * N")),
    case("the prediction in seconds", "test_prediction", "not seconds",
         ("prediction", "(stream_gbs[P] * 1e9) * 1e3", "(stream_gbs[P] * 1e9)")),
    case("one thread's bandwidth divided by P", "test_prediction", "stream_gbs[1]",
         ("prediction", "(stream_gbs[P] * 1e9) * 1e3 for P",
          "(stream_gbs[1] * 1e9) * 1e3 / P for P")),
    # off by a relative 2e-4, not rounded: a measured rate can round to itself and lose nothing
    case("the predictions typed in, off in the fourth digit", "test_prediction",
         "typed in or rounded",
         ("prediction", "{P: 24 * N / (stream_gbs[P] * 1e9) * 1e3 for P",
          "{P: 24 * N / (stream_gbs[P] * 1e9) * 1e3 * (1 + 2e-4) for P")),
    case("one thread's bandwidth for every P", "test_prediction", "not the time on one rank",
         ("prediction", "(stream_gbs[P] * 1e9) * 1e3 for P", "(stream_gbs[1] * 1e9) * 1e3 for P")),
    case("seconds against ms", "test_which_term", "one unit",
         ("which_term", '"add": predicted_add_ms[P_top] / 1e3', '"add": predicted_add_ms[P_top]')),
    case("the model over the measurement", "test_which_term", "measured over the model",
         ("which_term", "float(phases.loc[P_top, k] / v)", "float(v / phases.loc[P_top, k])")),
    case("the parallel fraction", "test_serial_fraction", "parallel fraction",
         ("serial_fraction", 'serial = runs["create"] + runs["distribute"] + runs["collect"]',
          'serial = runs["add"]')),
    case("s as the ratio of summed times", "test_serial_fraction", "average the runs' fractions",
         ("serial_fraction", "return float((serial / runs[\"total\"]).mean())",
          "return float(serial.sum() / runs[\"total\"].sum())")),
    case("s as the median of the runs' fractions", "test_serial_fraction",
         "median of the runs' fractions",
         ("serial_fraction", "return float((serial / runs[\"total\"]).mean())",
          "return float((serial / runs[\"total\"]).median())")),
    case("s and 1 - s swapped in Amdahl's law", "test_serial_fraction", "swapped",
         ("serial_fraction", "return 1.0 / (s + (1.0 - s) / np.asarray(P, dtype=float))",
          "return 1.0 / ((1.0 - s) + s / np.asarray(P, dtype=float))")),
    case("boxes of A and B sent as contiguous copies", "test_cartesian_add",
         "as contiguous copies",
         ("cartesian_add", "            cart.Send([A, 1, t], dest=r, tag=1)\n"
          "            cart.Send([B, 1, t], dest=r, tag=2)\n",
          "            s_, c_ = box(r)\n"
          "            sl = tuple(slice(o, o + n) for o, n in zip(s_, c_))\n"
          "            cart.Send(A[sl].copy(), dest=r, tag=1)\n"
          "            cart.Send(B[sl].copy(), dest=r, tag=2)\n")),
    case("boxes of C received into contiguous arrays", "test_cartesian_add",
         "into contiguous arrays",
         ("cartesian_add", "            cart.Recv([C, 1, t], source=r, tag=3)\n",
          "            s_, c_ = box(r)\n"
          "            buf = np.empty(c_)\n"
          "            cart.Recv(buf, source=r, tag=3)\n"
          "            C[tuple(slice(o, o + n) for o, n in zip(s_, c_))] = buf\n")),
    case("s without the create phase", "test_serial_fraction", "leaves out the create phase",
         ("serial_fraction", 'serial = runs["create"] + runs["distribute"] + runs["collect"]',
          'serial = runs["distribute"] + runs["collect"]')),
    case("a one-sided t, a 90% interval", "test_fit_amdahl", "a 90% interval",
         ("fit_amdahl", "stats.t.ppf(0.975, P.size - 1)", "stats.t.ppf(0.95, P.size - 1)")),
    case("the variance for the standard error", "test_fit_amdahl", "square root",
         ("fit_amdahl", "np.sqrt(cov[0, 0])", "cov[0, 0]")),
    case("z = 1.96 for a handful of points", "test_fit_amdahl", "95% interval",
         ("fit_amdahl", "stats.t.ppf(0.975, P.size - 1)", "1.96")),
    case("the fit through P = 1 too", "test_fit_amdahl", "leave out P = 1",
         ("fit_amdahl", "keep = P > 1", "keep = P > 0")),
    case("a fit of one point with P > 1", "test_fit_amdahl", "raise a ValueError",
         ("fit_amdahl", "if keep.sum() < 2:", "if keep.sum() < 1:")),
    case("ORFEO's speed-up on one node at 12 cores", "test_orfeo", "24 cores",
         ("orfeo", "orfeo_S24 = float(predict_speedup(s_orfeo, 24))",
          "orfeo_S24 = float(predict_speedup(s_orfeo, 12))")),
    case("s from another row of the dataset", "test_orfeo", "amdahl_serial_fraction_s",
         ("orfeo", 's_orfeo = float(orfeo.set_index("quantity").loc["amdahl_serial_fraction_s", '
          '"value"])', 's_orfeo = float(orfeo["value"].iloc[1])')),
    case("a rounded speed-up", "test_orfeo", "but rounded",
         ("orfeo", "orfeo_S48 = float(predict_speedup(s_orfeo, 48))",
          "orfeo_S48 = round(float(predict_speedup(s_orfeo, 48)), 2)")),
    case("s and 1 - s swapped", "test_orfeo", "Amdahl's limit",
         ("orfeo", "orfeo_S24 = float(predict_speedup(s_orfeo, 24))",
          "orfeo_S24 = float(predict_speedup(1 - s_orfeo, 24))")),
    case("the simulated speed-up upside down", "test_simulated", "upside down",
         ("simulated", 'float(sim_phases.loc[1, "total [ms]"] / t)',
          'float(t / sim_phases.loc[1, "total [ms]"])')),
    case("Amdahl on 12 ranks from ORFEO's s", "test_simulated", "not from ORFEO's s",
         ("simulated", "float(predict_speedup(sim_s1, 12))",
          "float(predict_speedup(s_orfeo, 12))")),
    case("the missing time with its sign reversed", "test_simulated", "above 0",
         ("simulated",
          'float(sim_phases.loc[12, "total [ms]"] - _t1 * (sim_s1 + (1 - sim_s1) / 12))',
          'float(_t1 * (sim_s1 + (1 - sim_s1) / 12) - sim_phases.loc[12, "total [ms]"])')),
    *judged_term_cases("which_term", "test_which_term"),
    case("the interpreter's cost as C minus Python", "test_interp", "upside down",
         ("interp", INTERP,
          INTERP.replace('"python"', '"x"').replace('"c"', '"python"').replace('"x"', '"c"'))),
    case("the interpreter's cost as the median of run-by-run differences", "test_interp",
         "not pairs",
         ("interp", INTERP,
          'np.median(np.asarray(am.work_seconds(tiny_df, "python", P_top, TINY))\n'
          '                 - np.asarray(am.work_seconds(tiny_df, "c", P_top, TINY)))')),
    case("the interpreter's cost from the means", "test_interp", "not their means",
         ("interp", INTERP, INTERP.replace("np.median", "np.mean"))),
    case("the interpreter's cost from the totals, create included", "test_interp",
         "hold the create phase",
         ("interp", INTERP,
          'np.median(am.phase_runs(tiny_df, P_top, "python", "3d", am.shape_name(*TINY))'
          '["total"])\n'
          '                 - np.median(am.phase_runs(tiny_df, P_top, "c", "3d", '
          'am.shape_name(*TINY))["total"])')),
    case("the interpreter's cost grown with the bytes", "test_interp", "whatever it carries",
         ("predict_python", PREDICT,
          'float(np.median(am.work_seconds(df, "c", P_top, SHAPE))\n'
          '                           * np.median(am.work_seconds(tiny_df, "python", P_top, '
          'TINY))\n'
          '                           / np.median(am.work_seconds(tiny_df, "c", P_top, TINY)))'
          )),
    case("the interpreter's cost from the student's own addition at TINY", "test_interp",
         "starts from your cartesian_add at TINY",
         ("interp", INTERP,
          'mine_tiny_s - np.median(am.work_seconds(tiny_df, "c", P_top, TINY))')),
    case("the interpreter's cost scaled by the elements", "test_interp",
         "multiplies interp_s by SHAPE's elements",
         ("predict_python", PREDICT,
          'float(np.median(am.work_seconds(df, "c", P_top, SHAPE))\n'
          '                           + interp_s * np.prod(SHAPE) / np.prod(TINY))')),
    # with few repetitions the median run can be the median of every phase: then the sum of
    # the phase medians is the median of the sums, and this answer is right; so it is when
    # the two predictions are within the check's tolerance (1e-6 of the prediction, or 10 ns)
    case("the prediction from (b)'s sum of phase medians", "test_interp", "c_3d_s of (b)",
         ("predict_python", PREDICT, "float(c_3d_s + interp_s)"),
         unless='np.isclose(c_3d_s + interp_s, '
                'float(np.median(am.work_seconds(df, "c", P_top, SHAPE))) + interp_s, rtol=1e-6)'),
    case("the Python program predicted from the student's own addition", "test_interp",
         "your cartesian_add's time",
         ("predict_python", PREDICT, "float(mine_s + interp_s)")),
    case("the interpreter's share of the student's own time", "test_python_verdict",
         "not your cartesian_add's",
         ("python_verdict", SHARE, "interp_share = interp_s / mine_s")),
    case("the interpreter's share of (b)'s sum of phase medians", "test_python_verdict",
         "sum of each phase's median",
         ("python_verdict", SHARE, "interp_share = interp_s / c_3d_s"),
         unless='np.isclose(c_3d_s, float(np.median(am.work_seconds(df, "c", P_top, SHAPE))), '
                'rtol=1e-6, atol=0)'),
    case("the interpreter's share as a percentage", "test_python_verdict", "not a percentage",
         ("python_verdict", SHARE, SHARE.replace("= interp_s", "= 100 * interp_s"))),
]
