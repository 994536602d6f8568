#!/usr/bin/python3
"""Reference vectors for pkg/analysis/judge, generated once with Debian's
python3-scipy (apt-get install -y python3-scipy) and committed as
pkg/analysis/judge/testdata/mannwhitney.json.

    /usr/bin/python3 hack/judge/vectors.py > pkg/analysis/judge/testdata/mannwhitney.json

The Go tests read the JSON; this script is only run again when cases are
added. The samples are seeded so the file is reproducible.
"""
import json
import numpy as np
import scipy
from scipy.stats import mannwhitneyu

rng = np.random.default_rng(37)

cases = []


def add(name, x, y):
    x = [float(v) for v in x]
    y = [float(v) for v in y]
    hl = float(np.median(np.subtract.outer(np.array(x), np.array(y))))
    for alt in ("two-sided", "greater", "less"):
        r = mannwhitneyu(x, y, alternative=alt, method="asymptotic", use_continuity=True)
        cases.append({
            "name": name, "x": x, "y": y, "alternative": alt,
            "u": float(r.statistic), "p": float(r.pvalue), "hodgesLehmann": hl,
        })


add("textbook", [19, 22, 16, 29, 24], [20, 11, 17, 12])
add("ties", [1, 2, 2, 3, 3, 3, 4], [2, 3, 3, 4, 4, 5, 5, 6])
add("zeros_tied", [0, 0, 0, 0.01, 0.02, 0.04], [0, 0, 0, 0, 0, 0.01])
add("identical_values_differ_in_count", [5, 5, 5], [5, 5, 5, 5, 5, 6])
add("normal_same", rng.normal(100, 10, 12), rng.normal(100, 10, 15))
add("normal_shift_up", rng.normal(130, 10, 10), rng.normal(100, 10, 10))
add("normal_shift_down", rng.normal(70, 10, 20), rng.normal(100, 10, 20))
add("lognormal_latency", rng.lognormal(-2, 0.5, 30), rng.lognormal(-2.3, 0.5, 25))
add("error_rates", rng.binomial(1000, 0.04, 8) / 1000, rng.binomial(1000, 0.01, 8) / 1000)
add("large", rng.normal(1.0, 0.3, 60), rng.normal(1.05, 0.3, 80))
add("rounded_ties", np.round(rng.normal(10, 2, 25)), np.round(rng.normal(11, 2, 25)))

json.dump({"scipy": scipy.__version__, "cases": cases}, __import__("sys").stdout, indent=1)
print()
