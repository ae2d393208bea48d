"""Turns the raw rows of bench/proxy.sh into a Markdown table: medians, min-max, ratios.

Usage: python3 bench/report.py proxy RESULTS
Rows: `CASE PROXY RUN RPS P50_US P99_US CPU_US_PER_REQ ERRORS SYS_US_PER_REQ` and
`peak_rss_kib PROXY KIB`.
"""

import statistics
import sys
from collections import defaultdict

PROXIES = ["portico", "portico-log", "nginx", "nginx-log", "haproxy", "floor", "raw"]


def load(path):
    runs = defaultdict(list)
    rss = {}
    notes = []
    with open(path) as f:
        for line in f:
            cols = line.split()
            if not cols or cols[0].startswith("#"):
                continue
            if cols[0] in ("access_log_lines", "access_log_dropped"):
                notes.append(" ".join(cols))
                continue
            if cols[0] == "peak_rss_kib":
                rss[cols[1]] = int(cols[2])
                continue
            case, proxy = cols[0], cols[1]
            rps, p50, p99, cpu, errors, sys_cpu = map(float, cols[3:9])
            runs[(case, proxy)].append(
                {"rps": rps, "p50": p50, "p99": p99, "cpu": cpu, "errors": errors, "sys": sys_cpu}
            )
    return runs, rss, notes


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def spread(rows, key, fmt):
    values = [r[key] for r in rows]
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def ms(us):
    return f"{us / 1000:.2f}"


def proxy_report(path):
    runs, rss, notes = load(path)
    cases = sorted({case for case, _ in runs}, key=lambda c: (c.startswith("large"), c))
    n = max((len(v) for v in runs.values()), default=0)
    print(
        f"Medians of {n} runs, (min–max) in brackets. CPU is the proxy's utime+stime per request; "
        "kernel is the stime part of it.\n"
    )
    print("| case | proxy | req/s | p50 ms | p99 ms | CPU µs/req | kernel µs/req | errors |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in cases:
        for proxy in PROXIES:
            rows = runs.get((case, proxy))
            if not rows:
                continue
            print(
                f"| {case} | {proxy} | {spread(rows, 'rps', lambda v: f'{v:.0f}')} "
                f"| {spread(rows, 'p50', ms)} | {spread(rows, 'p99', ms)} "
                f"| {spread(rows, 'cpu', lambda v: f'{v:.1f}')} "
                f"| {med(rows, 'sys'):.1f} "
                f"| {sum(r['errors'] for r in rows):.0f} |"
            )
    print("\nRatios of medians (Portico / other): req/s higher is better; CPU, p99 lower is better.\n")
    print("| case | vs | req/s | CPU/req | p50 | p99 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case in cases:
        ours = runs.get((case, "portico"))
        for other in ["nginx", "haproxy", "floor", "raw"]:
            theirs = runs.get((case, other))
            if not ours or not theirs:
                continue
            ratio = lambda k: med(ours, k) / med(theirs, k) if med(theirs, k) else float("nan")
            print(
                f"| {case} | {other} | {ratio('rps'):.2f} | {ratio('cpu'):.2f} "
                f"| {ratio('p50'):.2f} | {ratio('p99'):.2f} |"
            )
    log_ratios(runs, cases)
    if notes:
        print("\nAccess log lines written (and Portico's dropped lines, its metric at the end):\n")
        for note in notes:
            print(f"- {note}")
    if rss:
        print("\nPeak RSS over the whole run (VmHWM, MiB; nginx: master + worker):\n")
        print("| proxy | peak RSS MiB |")
        print("| --- | --- |")
        for proxy in PROXIES:
            if proxy in rss:
                print(f"| {proxy} | {rss[proxy] / 1024:.1f} |")


def log_ratios(runs, cases):
    """The access log's cost: each proxy with its log on over itself with it off (`portico-log`
    / `portico`, `nginx-log` / `nginx`), and Portico's latency against nginx's, both logging."""
    for on_name, off_name in [("portico-log", "portico"), ("nginx-log", "nginx")]:
        pairs = [(c, runs.get((c, on_name)), runs.get((c, off_name))) for c in cases]
        pairs = [(c, on, off) for c, on, off in pairs if on and off]
        if not pairs:
            continue
        print(
            f"\nAccess log on / off ({on_name} / {off_name}): CPU/req above 1.00 is the log's cost.\n"
        )
        print("| case | CPU/req on | CPU/req off | ratio | req/s ratio | p99 ratio |")
        print("| --- | --- | --- | --- | --- | --- |")
        for case, on, off in pairs:
            print(
                f"| {case} | {med(on, 'cpu'):.1f} | {med(off, 'cpu'):.1f} "
                f"| {med(on, 'cpu') / med(off, 'cpu'):.3f} | {med(on, 'rps') / med(off, 'rps'):.2f} "
                f"| {med(on, 'p99') / med(off, 'p99'):.2f} |"
            )
        for case, on, off in pairs:
            each = [a["cpu"] / b["cpu"] for a, b in zip(on, off) if b["cpu"]]
            listed = " ".join(f"{r:.3f}" for r in each)
            print(f"\n{case}, CPU/req on / off in each run: {listed}")
    pairs = [(c, runs.get((c, "portico-log")), runs.get((c, "nginx-log"))) for c in cases]
    pairs = [(c, ours, theirs) for c, ours, theirs in pairs if ours and theirs]
    if pairs:
        print("\nBoth logging (portico-log / nginx-log): lower is better.\n")
        print("| case | CPU/req | p50 | p99 |")
        print("| --- | --- | --- | --- |")
        for case, ours, theirs in pairs:
            ratio = lambda k: med(ours, k) / med(theirs, k) if med(theirs, k) else float("nan")
            print(f"| {case} | {ratio('cpu'):.2f} | {ratio('p50'):.2f} | {ratio('p99'):.2f} |")
        print("\np99 of portico-log over nginx-log's in each run (they run back to back):\n")
        print("| case | per run | median | above 1.00 |")
        print("| --- | --- | --- | --- |")
        for case, ours, theirs in pairs:
            each = [o["p99"] / t["p99"] for o, t in zip(ours, theirs) if t["p99"]]
            if each:
                listed = " ".join(f"{r:.2f}" for r in each)
                above = sum(r > 1 for r in each)
                print(f"| {case} | {listed} | {statistics.median(each):.2f} | {above} of {len(each)} |")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "proxy":
        sys.exit("usage: report.py proxy RESULTS")
    proxy_report(sys.argv[2])
