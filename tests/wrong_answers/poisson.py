"""The Poisson lab's common wrong answers (see tests/wrong_answers/__init__.py)."""
from wrong_answers import case, interval_upside_down

WRONG = [
    case("the dot product of a rank's own rows", "test_cg", "own rows only",
         ("cg", "return comm.allreduce(float(np.vdot(a[1:-1, 1:-1], b[1:-1, 1:-1])), op=MPI.SUM)",
          "return float(np.vdot(a[1:-1, 1:-1], b[1:-1, 1:-1]))")),
    case("the dot product with the halo rows", "test_cg", "counts the halo rows",
         ("cg", "float(np.vdot(a[1:-1, 1:-1], b[1:-1, 1:-1]))",
          "float(np.vdot(a[:, 1:-1], b[:, 1:-1]))")),
    case("A p without the halo exchange", "test_cg", "never filled",
         ("cg", "    cart.Sendrecv(p[1], dest=lower, sendtag=1, recvbuf=p[-1], source=upper, "
          "recvtag=1)\n    cart.Sendrecv(p[-2], dest=upper, sendtag=2, recvbuf=p[0], "
          "source=lower, recvtag=2)\n", "")),
    case("one halo row per rank", "test_cg", "never filled",
         ("cg", "    cart.Sendrecv(p[-2], dest=upper, sendtag=2, recvbuf=p[0], "
          "source=lower, recvtag=2)\n", "")),
    case("CG stopped on an absolute tolerance", "test_cg", "relative to the first residual",
         ("cg", "while not np.sqrt(rr) <= tol * np.sqrt(rr0):",
          "while not np.sqrt(rr) <= tol:")),
    case("the mean error", "test_order", "mean error",
         ("order", "float(np.max(np.abs(x - poisson.exact(*poisson.mesh(N)))))",
          "float(np.mean(np.abs(x - poisson.exact(*poisson.mesh(N)))))")),
    case("efficiency as the speed-up over the nodes", "test_speedup", "not S over the nodes",
         ("speedup", 'table41c["speedup"] / table41c["mpi_total"]',
          'table41c["speedup"] / table41c["nodes"]')),
    case("one thread's bandwidth for every P", "test_predict", "not one thread's",
         ("predict", "memory = 88 * N * N / (stream_gbs[P] * 1e9)",
          "memory = 88 * N * N / (stream_gbs[1] * 1e9)")),
    case("one halo row each way", "test_predict", "two halo rows",
         ("predict", "halo = 2 * (lam + 8 * (N + 2) / B) if P > 1 else 0.0",
          "halo = (lam + 8 * (N + 2) / B) if P > 1 else 0.0")),
    case("the prediction over the measurement", "test_which_part", "measured over predicted",
         ("which_part", "float(_m.sum() / pred[P_top])", "float(pred[P_top] / _m.sum())")),
    case("the product alone as the memory traffic", "test_which_part", "updates move memory",
         ("which_part", '"memory": _m["A p"] + _m["updates"]', '"memory": _m["A p"]')),
    case("the simulated speed-up as its efficiency", "test_simulated", "divides it by P",
         ("simulated", "float(_t.loc[1] / (p * v))", "float(_t.loc[1] / v)")),
    case("the report's speed-up as its efficiency", "test_simulated", "divides it by 32",
         ("simulated", "float(_e.loc[(1, 32)])",
          "float(_e.loc[(1, 32)] * 32)")),
    interval_upside_down("which_part"),
]
