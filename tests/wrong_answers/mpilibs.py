"""The MPI libraries lab's common wrong answers (see tests/wrong_answers/__init__.py)."""
from wrong_answers import case, right

# true in the kernel when every other library's interval excludes MPICH's prediction at every
# size: then listing every size whose median is off is the right answer too
EVERY_SIZE_DIFFERS = (
    "all(not r.low_us <= predicted_us[int(r.nbytes)] <= r.high_us "
    "for r in bound[bound['impl'] != first].itertuples())")
# true when no verdict at the smallest size is a difference either way (so that a verdict of
# the inverted ratio is the same)
NO_BINDING_DIFFERENCE = "all(v in ('no difference shown', 'cannot tell') for v in binding.values())"
# true when each application's fastest median is also the library the intervals recommend
FASTEST_IS_CLEAR = (
    "all(any(all(at.loc[s, 'high_us'] < at.loc[o, 'low_us'] for o in at.index if o != s) "
    "for s in at.index) for at in [bound[bound['nbytes'] == size].set_index('impl') "
    "for _, size in apps.values()])")
# true when the ratio's side of 1 is the interval's verdict wherever there is one
RATIO_IS_VERDICT = (
    "all((lambda r, lo, hi: (hi < 1) == (r < 1) and (lo > 1) == (r >= 1))("
    "*stats.ratio_or_nan(g.loc[g['placement'] == 'core', 'value'], "
    "g.loc[g['placement'] == 'none', 'value'])) for _, g in "
    "df[(df['test'] == 'pingpong') & (df['metric'] == 'time') & (df['nbytes'] == smallest)]"
    ".groupby('impl'))")

WRONG = [
    right("Hockney's line by numpy's weighted polyfit",
          ("hockney_line", """    a = np.column_stack([1 / times, nbytes / times])
    (lam, inv_b), *_ = np.linalg.lstsq(a, np.ones_like(times), rcond=None)""",
           """    inv_b, lam = np.polyfit(nbytes, times, 1, w=1 / times)""")),
    # split_fit's check fits each side with the student's own line: only the line loses
    case("Hockney's line fitted to the absolute errors", "test_hockney_line", "absolute errors",
         ("hockney_line", "a = np.column_stack([1 / times, nbytes / times])",
          "a = np.column_stack([np.ones_like(times), nbytes])"),
         ("hockney_line", "np.linalg.lstsq(a, np.ones_like(times), rcond=None)",
          "np.linalg.lstsq(a, times, rcond=None)")),
    case("the slope 1/B returned as B", "test_hockney_line", "the slope 1/B",
         ("hockney_line", "return float(lam), float(1 / inv_b)",
          "return float(lam), float(inv_b)")),
    case("(B, lam) returned for (lam, B)", "test_hockney_line", "you returned (B, lam)",
         ("hockney_line", "return float(lam), float(1 / inv_b)",
          "return float(1 / inv_b), float(lam)")),
    case("the last size below the split returned as the switch", "test_split_fit",
         "last size of the lower segment",
         ("split_fit", '"switch": float(nbytes[i])', '"switch": float(nbytes[i - 1])')),
    case("splits that leave two sizes on one side", "test_split_fit", "keep at least three",
         ("split_fit", "for i in range(min_points, len(nbytes) - min_points + 1):",
          "for i in range(2, len(nbytes) - 1):")),
    case("the split loop one split short", "test_split_fit", "stops one split short",
         ("split_fit", "for i in range(min_points, len(nbytes) - min_points + 1):",
          "for i in range(min_points, len(nbytes) - min_points):")),
    case("splits scored by the absolute errors", "test_split_fit", "compares absolute errors",
         ("split_fit", "return float(np.sum(((t - lam - n / bw) / t) ** 2))",
          "return float(np.sum((t - lam - n / bw) ** 2))")),
    case("the prediction's switch size given the lower line", "test_differs",
         "at the switch itself you used the lower line",
         ("differs", 'if n < first_fit["switch"] else', 'if n <= first_fit["switch"] else')),
    case("the prediction in seconds", "test_differs", "in seconds",
         ("differs", "return (lam + n / bw) * 1e6", "return lam + n / bw")),
    case("every size whose median is off counted as a difference", "test_differs",
         "a median is never exactly on it",
         ("differs", "if np.isfinite([r.low_us, r.high_us]).all()\n"
                     "                        and not r.low_us <= predicted_us[int(r.nbytes)] "
                     "<= r.high_us)",
          "if r.time_us != predicted_us[int(r.nbytes)])"),
         unless=EVERY_SIZE_DIFFERS),
    case("MPICH compared with its own lines", "test_differs", "leave mpich out",
         ("differs", "for slug, g in bound.groupby(\"impl\") if slug != first}",
          "for slug, g in bound.groupby(\"impl\")}")),
    case("binding judged by unbound over bound", "test_binding", "you divided unbound by bound",
         ("binding", """stats.ratio_or_nan(g.loc[g["placement"] == "core", "value"],
                                       g.loc[g["placement"] == "none", "value"])""",
          """stats.ratio_or_nan(g.loc[g["placement"] == "none", "value"],
                                       g.loc[g["placement"] == "core", "value"])"""),
         unless=NO_BINDING_DIFFERENCE),
    case("binding judged by the ratio's side of 1, not its interval", "test_binding",
         "whichever side of 1",
         ("binding", '        binding[slug] = ("bound faster" if high < 1 else "bound slower" '
                     'if low > 1\n                         else "no difference shown")',
          """        binding[slug] = "bound faster" if _r < 1 else "bound slower\""""),
         unless=RATIO_IS_VERDICT),
    case("the simulated time over the published one", "test_extra", "simulated over published",
         ("extra", 'float(_big[c] / _big["simulated_us"])',
          'float(_big["simulated_us"] / _big[c])')),
    case("the 40-rank run instead of 160 ranks", "test_extra", "the 40-rank run",
         ("extra", '(exchange["nprocs"] == 160)', '(exchange["nprocs"] == 40)')),
    case("the applications' time in µs", "test_recommend", "in µs: give seconds",
         ("recommend", 'float(at.loc[slug, "time_us"]) * 1e-6', 'float(at.loc[slug, "time_us"])')),
    case("the lowest median recommended even where intervals overlap", "test_recommend",
         "the data cannot choose",
         ("recommend", "    recommend[app] = clear[0] if clear else \"none\"",
          "    recommend[app] = at[\"time_us\"].idxmin()"),
         unless=FASTEST_IS_CLEAR),
]
