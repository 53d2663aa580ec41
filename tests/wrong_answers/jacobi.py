"""The Jacobi lab's common wrong answers (see tests/wrong_answers/__init__.py)."""
from wrong_answers import case, interval_upside_down

WRONG = [
    case("one halo plane per rank: only the lower neighbour's", "test_exchange_slab",
         "differ from the serial sweep",
         ("exchange_slab",
          "    cart.Sendrecv(u[1], dest=lower, sendtag=1, recvbuf=u[-1], source=upper, "
          "recvtag=1)\n", "")),
    case("the halo of one direction only", "test_exchange_halo", "still held NaN",
         ("exchange_halo", "    for d in range(3):", "    for d in range(1):")),
    case("the first plane sent up instead of down", "test_exchange_halo", "wrong plane",
         ("exchange_halo", "cart.Sendrecv([u, 1, first], dest=lower, sendtag=d, "
          "recvbuf=[u, 1, halo_high],\n                      source=upper, recvtag=d)",
          "cart.Sendrecv([u, 1, first], dest=upper, sendtag=d, recvbuf=[u, 1, halo_low],\n"
          "                      source=lower, recvtag=d)"),
         ("exchange_halo", "cart.Sendrecv([u, 1, last], dest=upper, sendtag=3 + d, "
          "recvbuf=[u, 1, halo_low],\n                      source=lower, recvtag=3 + d)",
          "cart.Sendrecv([u, 1, last], dest=lower, sendtag=3 + d, recvbuf=[u, 1, halo_high],\n"
          "                      source=upper, recvtag=3 + d)")),
    case("the model without the latency term", "test_predict", "latency term",
         ("predict", "comm = L**2 * k * 2 * 8 / B + k * lam", "comm = L**2 * k * 2 * 8 / B")),
    case("one way of a face: 8 bytes per point", "test_predict", "2 · 8 bytes",
         ("predict", "comm = L**2 * k * 2 * 8 / B + k * lam", "comm = L**2 * k * 8 / B + k * lam")),
    case("one face whatever is cut", "test_predict", "not one",
         ("predict", "comm = L**2 * k * 2 * 8 / B + k * lam",
          "comm = L**2 * 2 * 8 / B + lam if k else 0.0")),
    case("three directions cut at every P", "test_predict", "k_cut",
         ("predict", 'k_cut = {P: sum(q > 1 for q in jx.grid_of("cube", P)) for P in P_TIMED}',
          "k_cut = {P: 3 for P in P_TIMED}")),
    case("one thread's bandwidth for every P", "test_predict", "one thread's bandwidth",
         ("predict", "(stream_gbs[P] / P * 1e9)", "(stream_gbs[1] * 1e9)")),
    case("P threads' bandwidth for every rank", "test_predict", "stream_gbs[P] / P",
         ("predict", "(stream_gbs[P] / P * 1e9)", "(stream_gbs[P] * 1e9)")),
    case("the model over the measurement", "test_which_term", "measured over the model",
         ("which_term", 'float(measured.loc[P_top, "compute"] / _Ts)',
          'float(_Ts / measured.loc[P_top, "compute"])')),
    case("the 48-process grid as one cut", "test_orfeo", "k = 3, not 1",
         ("orfeo", "L48, k48 = 1200, 3", "L48, k48 = 1200, 1")),
    case("c with 8 bytes per face point", "test_orfeo", "both ways",
         ("orfeo", "c48 = L48**2 * k48 * 2 * 8", "c48 = L48**2 * k48 * 8")),
    case("the slow-down without latency", "test_orfeo", "latency term",
         ("orfeo", " + k48 * 0.99e-6) / Ts", ") / Ts")),
    case("efficiency as the speed-up over the nodes", "test_simulated", "per rank, not per node",
         ("simulated", "float(_t.loc[1] / v)", "float(48 * _t.loc[1] / v / 2)")),
    case("the simulated efficiency upside down", "test_simulated", "upside down",
         ("simulated", "float(_t.loc[1] / v)", "float(v / _t.loc[1])")),
    case("the report's slow-down as its efficiency", "test_simulated", "inverse",
         ("simulated", 'float(1 / sim_table.loc[48, "slow-down, report 001"])',
          'float(sim_table.loc[48, "slow-down, report 001"])')),
    case("T_s in ms beside T_c in s", "test_simulated", "in ms",
         ("simulated", '_Ts = _t.loc[1] * 1e-3', '_Ts = _t.loc[1]')),
    interval_upside_down("which_term"),
]
