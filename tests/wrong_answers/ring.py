"""The Ring lab's common wrong answers (see tests/wrong_answers/__init__.py)."""
from wrong_answers import case

# the solution's step of (a): both receives, both sends, one wait for all four
STEP = """        MPI.Request.Waitall([cart.Irecv(from_left, source=left, tag=1),
                             cart.Irecv(from_right, source=right, tag=2),
                             cart.Isend(to_right, dest=right, tag=1),
                             cart.Isend(to_left, dest=left, tag=2)])"""
RECEIVES = """        recvs = [cart.Irecv(from_left, source=left, tag=1),
                 cart.Irecv(from_right, source=right, tag=2)]
"""

WRONG = [
    case("the non-blocking ring waits for its sends before it posts its receives",
         "test_nonblocking_ring", "waited for its sends before posting any receive",
         ("nonblocking_ring", STEP,
          """        MPI.Request.Waitall([cart.Isend(to_right, dest=right, tag=1),
                             cart.Isend(to_left, dest=left, tag=2)])
        MPI.Request.Waitall([cart.Irecv(from_left, source=left, tag=1),
                             cart.Irecv(from_right, source=right, tag=2)])""")),
    case("the non-blocking ring waits for each send at once", "test_nonblocking_ring",
         "waited for its first send before it started the second",
         ("nonblocking_ring", STEP,
          RECEIVES + """        cart.Isend(to_right, dest=right, tag=1).Wait()
        cart.Isend(to_left, dest=left, tag=2).Wait()
        MPI.Request.Waitall(recvs)""")),
    case("the non-blocking ring waits for its receives only", "test_nonblocking_ring",
         "not waited for",
         ("nonblocking_ring", STEP,
          RECEIVES + """        cart.Isend(to_right, dest=right, tag=1)
        cart.Isend(to_left, dest=left, tag=2)
        MPI.Request.Waitall(recvs)""")),
    case("the non-blocking ring written with blocking Sendrecv", "test_nonblocking_ring",
         "no blocking call",
         ("nonblocking_ring", STEP,
          """        cart.Sendrecv(to_right, dest=right, sendtag=1, recvbuf=from_left, source=left,
                      recvtag=1)
        cart.Sendrecv(to_left, dest=left, sendtag=2, recvbuf=from_right, source=right,
                      recvtag=2)""")),
    case("even ranks send both directions before receiving: deadlocks with an odd P",
         "test_ordered_ring", "did not finish within 8 s on 3 ranks",
         ("ordered_ring", "        for out, dest, into, source, tag in",
          """        if size > 1 and rank % 2 == 0:
            cart.Ssend(to_right, dest=right, tag=1)
            cart.Ssend(to_left, dest=left, tag=2)
            cart.Recv(from_left, source=left, tag=1)
            cart.Recv(from_right, source=right, tag=2)
        elif size > 1:
            cart.Recv(from_left, source=left, tag=1)
            cart.Recv(from_right, source=right, tag=2)
            cart.Ssend(to_right, dest=right, tag=1)
            cart.Ssend(to_left, dest=left, tag=2)
        for out, dest, into, source, tag in ([] if size > 1 else"""),
         ("ordered_ring", """((to_right, right, from_left, left, 1),
                                             (to_left, left, from_right, right, 2)):""",
          """[(to_right, right, from_left, left, 1),
                                              (to_left, left, from_right, right, 2)]):""")),
    case("a ring of one sends synchronously to itself", "test_ordered_ring",
         "With P = 1 use Sendrecv",
         ("ordered_ring", "if size == 1:", "if size == 0:")),
    case("Sendrecv on every P: safe, but not the blocking ring made safe", "test_ordered_ring",
         "calls Sendrecv",
         ("ordered_ring", "if size == 1:", "if True:")),
    case("a non-blocking send and a wait", "test_ordered_ring", "calls Isend",
         ("ordered_ring", "cart.Ssend(out, dest=dest, tag=tag)",
          "cart.Isend(out, dest=dest, tag=tag).Wait()")),
    case("the standard-mode ring with synchronous sends", "test_other_rings", "did not finish",
         ("other_rings", "        cart.Send(to_right, dest=right, tag=1)\n"
                         "        cart.Send(to_left, dest=left, tag=2)",
          "        cart.Ssend(to_right, dest=right, tag=1)\n"
          "        cart.Ssend(to_left, dest=left, tag=2)")),
    case("the Isend ring receiving with Irecv", "test_other_rings", "calls Irecv",
         ("other_rings", "        cart.Recv(from_left, source=left, tag=1)\n"
                         "        cart.Recv(from_right, source=right, tag=2)\n"
                         "        MPI.Request.Waitall(sends)",
          "        MPI.Request.Waitall([*sends, cart.Irecv(from_left, source=left, tag=1),\n"
          "                             cart.Irecv(from_right, source=right, tag=2)])")),
    case("the Isend ring sending with the blocking Send", "test_other_rings", "calls Send",
         ("other_rings", "        sends = [cart.Isend(to_right, dest=right, tag=1), "
                         "cart.Isend(to_left, dest=left, tag=2)]",
          "        cart.Send(to_right, dest=right, tag=1)\n"
          "        cart.Send(to_left, dest=left, tag=2)\n        sends = []")),
    case("the standard-mode ring sending one direction only", "test_other_rings",
         "two messages per step",
         ("other_rings", "        cart.Send(to_left, dest=left, tag=2)\n"
                         "        cart.Recv(from_left, source=left, tag=1)\n"
                         "        cart.Recv(from_right, source=right, tag=2)\n",
          "        cart.Recv(from_left, source=left, tag=1)\n")),
    case("the standard-mode ring ordered by parity", "test_other_rings", "no ordering by rank",
         ("other_rings", "        cart.Send(to_right, dest=right, tag=1)\n"
                         "        cart.Send(to_left, dest=left, tag=2)\n"
                         "        cart.Recv(from_left, source=left, tag=1)\n"
                         "        cart.Recv(from_right, source=right, tag=2)\n",
          "        if rank % 2:\n"
          "            cart.Recv(from_left, source=left, tag=1)\n"
          "            cart.Recv(from_right, source=right, tag=2)\n"
          "        cart.Send(to_right, dest=right, tag=1)\n"
          "        cart.Send(to_left, dest=left, tag=2)\n"
          "        if not rank % 2:\n"
          "            cart.Recv(from_left, source=left, tag=1)\n"
          "            cart.Recv(from_right, source=right, tag=2)\n")),
    case("the Isend ring never waiting for its sends", "test_other_rings", "never waited",
         ("other_rings", "        MPI.Request.Waitall(sends)\n", "")),
    case("the Isend ring waiting for its sends before receiving", "test_other_rings",
         "waited for a send before its receives",
         ("other_rings", "        cart.Recv(from_left, source=left, tag=1)\n"
                         "        cart.Recv(from_right, source=right, tag=2)\n"
                         "        MPI.Request.Waitall(sends)\n",
          "        MPI.Request.Waitall(sends)\n"
          "        cart.Recv(from_left, source=left, tag=1)\n"
          "        cart.Recv(from_right, source=right, tag=2)\n")),
    case("the Isend ring changing its arrays in place before waiting for the sends",
         "test_other_rings", "changed what it was sending before it waited",
         ("other_rings", "        MPI.Request.Waitall(sends)\n"
                         "        if step < size - 1:\n"
                         "            to_right = from_left + rank\n"
                         "            to_left = from_right - rank\n",
          "        if step < size - 1:\n"
          "            to_right[:] = from_left + rank\n"
          "            to_left[:] = from_right - rank\n"
          "        MPI.Request.Waitall(sends)\n"
          "        if step < size - 1:\n")),
    case("the ordered ring ordered by rank < P/2: safe, but a chain", "test_ordered_ring",
         "by the parity of the rank",
         ("ordered_ring", "elif rank % 2 == 0:", "elif rank < size / 2:")),
    case("the non-blocking ring with one tag for both directions", "test_nonblocking_ring",
         "sent both directions with tag 1",
         ("nonblocking_ring", "cart.Irecv(from_right, source=right, tag=2)",
          "cart.Irecv(from_right, source=right, tag=1)"),
         ("nonblocking_ring", "cart.Isend(to_left, dest=left, tag=2)",
          "cart.Isend(to_left, dest=left, tag=1)")),
    case("the step in seconds", "test_which_term", "give it in µs",
         ("which_term", '"irecv", P_top)) / P_top * 1e6', '"irecv", P_top)) / P_top')),
    case("λ typed in, off in the fourth digit", "test_fit_lambda", "is not fit_lambda",
         ("fit_lambda", 'lam_irecv = fit_lambda(*c_times("irecv"))',
          'lam_irecv = fit_lambda(*c_times("irecv")) * (1 + 1e-3)')),
    case("the published jump as the blocking ratio", "test_simulated",
         "blocking over non-blocking ratio within a node",
         ("simulated", '_o[("internode", "irecv")] / _o[("intranode", "irecv")]',
          '_o[("intranode", "ssend_ordered")] / _o[("intranode", "irecv")]')),
    case("the standard-mode ring safe at 16 MiB", "test_deadlocks", "eager limit",
         ("deadlocks", '"send": True', '"send": False')),
    case("the non-blocking step as two latencies", "test_prediction", "not two",
         ("prediction", "= 1 * pp_latency_us", "= 2 * pp_latency_us")),
    case("the ordered step as two latencies", "test_prediction", "two turns",
         ("prediction", "= 4 * pp_latency_us", "= 2 * pp_latency_us")),
    case("the ordered step as three turns per direction (an odd ring)", "test_prediction",
         "two turns per direction",
         ("prediction", "= 4 * pp_latency_us", "= 6 * pp_latency_us")),
    case("the ordered step's two directions sharing a turn", "test_prediction",
         "do not share a turn",
         ("prediction", "= 4 * pp_latency_us", "= 3 * pp_latency_us")),
    # off by a relative 2e-4, not round(): a latency measured in whole nanoseconds over a batch
    # can round to itself and lose nothing
    case("the prediction typed in, off in the fourth digit", "test_prediction",
         "typed in or rounded",
         ("prediction", "= 1 * pp_latency_us", "= pp_latency_us * (1 + 2e-4)")),
    case("the predictions in seconds", "test_prediction", "microseconds",
         ("prediction", "= 1 * pp_latency_us", "= 1 * pp_latency_s"),
         ("prediction", "= 4 * pp_latency_us", "= 4 * pp_latency_s")),
    case("the predictions in nanoseconds", "test_prediction", "nanoseconds",
         ("prediction", "= 1 * pp_latency_us", "= 1e3 * pp_latency_us"),
         ("prediction", "= 4 * pp_latency_us", "= 4e3 * pp_latency_us")),
    case("the time of a whole ring as a step", "test_which_term", "whole ring",
         ("which_term", '"irecv", P_top)) / P_top * 1e6', '"irecv", P_top)) * 1e6')),
    case("the mean ring instead of the median", "test_which_term", "the median time",
         ("which_term", "measured_irecv_step_us = np.median(",
          "measured_irecv_step_us = np.mean(")),
    case("the prediction over the measurement", "test_which_term", "measured over predicted",
         ("which_term", "measured_irecv_step_us / predicted_irecv_step_us",
          "predicted_irecv_step_us / measured_irecv_step_us")),
    case("your ring predicted from the C ring", "test_predict_mine", "that is the C ring",
         ("predict_mine", '"python", "irecv", P_top)) * 1e6', '"c", "irecv", P_top)) * 1e6')),
    case("the interpreter's cost upside down", "test_beside_c_split", "upside down",
         ("beside_c_split", "interp_us = _py_us - _c_us", "interp_us = _c_us - _py_us")),
    case("your function's own work as your ring minus C", "test_beside_c_split",
         "take away the Python ring",
         ("beside_c_split", 'mine_extra_us = mine_s["irecv"] * 1e6 - _py_us',
          'mine_extra_us = mine_s["irecv"] * 1e6 - _c_us')),
    case("λ as the mean of T/P", "test_fit_lambda", "least-squares slope",
         ("fit_lambda", "return float(np.sum(P * T) / np.sum(P * P))",
          "return float(np.mean(T / P))")),
    case("ORFEO's step across nodes", "test_orfeo", "internode",
         ("orfeo", 'per_step[("intranode", "irecv")] * 1e6',
          'per_step[("internode", "irecv")] * 1e6')),
    case("ORFEO's step of the ordered blocking ring", "test_orfeo", "ssend_ordered",
         ("orfeo", 'orfeo_irecv_intranode_us = per_step[("intranode", "irecv")] * 1e6',
          'orfeo_irecv_intranode_us = per_step[("intranode", "ssend_ordered")] * 1e6')),
    case("ORFEO's blocking ratio across nodes", "test_orfeo", "ratio across nodes",
         ("orfeo", 'per_step[("intranode", "ssend_ordered")] / per_step[("intranode", "irecv")]',
          'per_step[("internode", "ssend_ordered")] / per_step[("internode", "irecv")]')),
    case("the student's blocking ratio upside down", "test_orfeo", "my_blocking_ratio",
         ("orfeo", "my_blocking_ratio = lam_ssend / lam_irecv",
          "my_blocking_ratio = lam_irecv / lam_ssend")),
    case("the last rank of the first node as the jump", "test_simulated", "the 25th",
         ("simulated", 'orfeo_spec["sockets_per_node"] + 1', 'orfeo_spec["sockets_per_node"]')),
    case("the simulated jump upside down", "test_simulated", "upside down",
         ("simulated", "sim_step_us[jump_at] / sim_step_us[jump_at - 1]",
          "sim_step_us[jump_at - 1] / sim_step_us[jump_at]")),
    case("the simulated steps scaled to µs twice", "test_simulated", "already in µs",
         ("simulated", "float(v) for p, v", "float(v) * 1e6 for p, v")),
    case("the published jump upside down", "test_simulated", "above 1",
         ("simulated", '_o[("internode", "irecv")] / _o[("intranode", "irecv")]',
          '_o[("intranode", "irecv")] / _o[("internode", "irecv")]')),
    case("the published jump of the ordered ring", "test_simulated", "non-blocking ring",
         ("simulated", '_o[("internode", "irecv")] / _o[("intranode", "irecv")]',
          '_o[("internode", "ssend_ordered")] / _o[("intranode", "ssend_ordered")]')),
    case("ORFEO's step as a quarter of the table's (per message)", "test_orfeo",
         "quarter of a step",
         ("orfeo", 'orfeo_irecv_intranode_us = per_step[("intranode", "irecv")] * 1e6',
          'orfeo_irecv_intranode_us = per_step[("intranode", "irecv")] / 4 * 1e6')),
    case("ORFEO's jump across nodes as its blocking ratio", "test_orfeo", "irecv ring's jump",
         ("orfeo", 'per_step[("intranode", "ssend_ordered")] / per_step[("intranode", "irecv")]',
          'per_step[("internode", "irecv")] / per_step[("intranode", "irecv")]')),
    case("the published jump mixing the two rings", "test_simulated", "mixes the two rings",
         ("simulated", '_o[("internode", "irecv")] / _o[("intranode", "irecv")]',
          '_o[("internode", "ssend_ordered")] / _o[("intranode", "irecv")]')),
    case("the ordered step as five latencies", "test_prediction", "count the turns",
         ("prediction", "= 4 * pp_latency_us", "= 5 * pp_latency_us")),
]
