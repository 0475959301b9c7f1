#!/usr/bin/env python3
"""Re-windows the work-factor e2e's raw inputs offline (docs/workfactor-report.md,
"The testbed"): the spans and per-second process CPU readings that
TestWorkFactorsOnTestbed saves with WORKFACTOR_SAMPLES_DIR, and the known costs
from its log. For each way of placing requests and readings in 5 s windows it
fits plain least squares per process group (web; app1+app2; primary+backup;
the backup alone) and prints the residual sigma (MHz) and each flow's error.

  python3 docs/workfactor/rewindow.py DIR test.log [samples.csv]

With a third argument it also writes the samples CSV (docs/formats.md §5) of
requests by span start and readings by the middle of their second, for
`tierscope workfactor --in` (the exporter's windows after this change).

Requests by: root (the window of the trace's root start: the exporter before
this change), start (the span's own start). Readings by: time (the reading's
timestamp), middle (the middle of the second it covers)."""
import collections, json, math, re, sys

W, OMEGA = 5, None


def attrs(a):
    return {kv['key']: next(iter(kv['value'].values()), None) for kv in a or []}


def lsq(cols, y):
    k, n = len(cols), len(y)
    a = [[sum(cols[i][t] * cols[j][t] for t in range(n)) for j in range(k)] + [1.0 if i == j else 0.0 for j in range(k)] for i in range(k)]
    b = [sum(cols[i][t] * y[t] for t in range(n)) for i in range(k)]
    for i in range(k):
        p = a[i][i]
        a[i] = [v / p for v in a[i]]
        for r in range(k):
            if r != i:
                f = a[r][i]
                a[r] = [a[r][c] - f * a[i][c] for c in range(2 * k)]
    inv = [row[k:] for row in a]
    x = [sum(inv[i][j] * b[j] for j in range(k)) for i in range(k)]
    res = [y[t] - sum(x[i] * cols[i][t] for i in range(k)) for t in range(n)]
    return x, math.sqrt(sum(r * r for r in res) / (n - k))


def main(d, log, csv_out=None):
    spans, cpu = [], collections.defaultdict(list)
    for line in open(d + '/spans.jsonl'):
        for rs in json.loads(line).get('resourceSpans', []):
            ra = attrs(rs['resource'].get('attributes'))
            for ss in rs.get('scopeSpans', []):
                for s in ss.get('spans', []):
                    spans.append((s['traceId'], s.get('kind', 0), ra.get('service.name'), ra.get('process.executable.name'),
                                  s['name'].rsplit('/', 1)[-1], int(s['startTimeUnixNano']), s['name'].split(' ', 1)[-1]))
    for line in open(d + '/process-cpu.jsonl'):
        for rm in json.loads(line).get('resourceMetrics', []):
            proc = attrs(rm['resource'].get('attributes')).get('process.executable.name')
            for sm in rm.get('scopeMetrics', []):
                for m in sm.get('metrics', []):
                    if m['name'] == 'process.cpu.utilization':
                        by = collections.defaultdict(float)
                        for dp in m['gauge']['dataPoints']:
                            by[int(dp['timeUnixNano'])] += dp.get('asDouble', 0)
                        cpu[proc] += sorted(by.items())
    text = open(log).read()
    omega = 2 * float(re.search(r'Ω = \d+ × ([\d.]+) MHz', text).group(1))
    known = {}
    for m in re.finditer(r'  (\w+ \w+)\s+share\s+([\d.]+)%\s+known\s+([\d.]+) Mc', text):
        known.setdefault(m.group(1), (float(m.group(3)), float(m.group(2))))
    root = {}
    for s in spans:
        root[s[0]] = min(root.get(s[0], s[5]), s[5])
    servers = [s for s in spans if s[1] == 2 and s[3]]
    # The load: the last run of windows in which at least five transactions ran.
    web = collections.defaultdict(set)
    for s in servers:
        if s[2] == 'web':
            web[s[5] // 10**9 // W * W].add(s[4])
    ws = sorted(w for w, v in web.items() if len(v) >= 5)
    first = ws[-1]
    for w in reversed(ws[:-1]):
        if first - w > 3 * W:
            break
        first = w
    wins = range(first + 2 * W, ws[-1] - W + 1, W)
    phase = sum(ts % 10**9 for p in cpu for ts, _ in cpu[p][-100:]) / sum(len(cpu[p][-100:]) for p in cpu) / 1e9
    print(f'{len(wins)} windows; readings taken {phase:.2f} s into each second')
    for by in ('root', 'start'):
        counts = collections.defaultdict(lambda: collections.defaultdict(float))
        for s in servers:
            t = root[s[0]] if by == 'root' else s[5]
            counts[(s[3], t // 10**9 // W * W)][s[2] + ' ' + s[4]] += 1 / W
        for at in ('time', 'middle'):
            read = collections.defaultdict(list)
            for p, samples in cpu.items():
                prev = None
                for ts, u in samples:
                    t = ts / 1e9 - ((ts - prev) / 2e9 if prev and ts - prev <= W * 10**9 and at == 'middle' else 0)
                    read[(p, int(t) // W * W)].append(u)
                    prev = ts
            sigmas, errs, worst = [], [], 0.0
            for group in (['tbweb'], ['tbapp1', 'tbapp2'], ['tbdb1', 'tbdb2'], ['tbdb2']):
                rows = [(p, w) for p in group for w in wins if (p, w) in read]
                flows = sorted({f for r in rows for f in counts[r]})
                x, sigma = lsq([[counts[r].get(f, 0) for r in rows] for f in flows], [omega * sum(read[r]) / len(read[r]) for r in rows])
                sigmas.append(f'{sigma:.0f}')
                for f, v in zip(flows, x):
                    if f in known:
                        e = (v - known[f][0]) / known[f][0]
                        asserted = known[f][1] >= 5 and group != ['tbdb2']
                        if asserted:
                            worst = max(worst, abs(e))
                        errs.append(f"{'*' if asserted and abs(e) > 0.15 else ''}{f}{' (backup)' if group == ['tbdb2'] else ''} {100 * e:+.0f}%")
            print(f"requests by {by:5}, readings by {at:6}: sigma {'/'.join(sigmas)} MHz, worst {100 * worst:.0f}% | {', '.join(errs)}")
            if csv_out and by == 'start' and at == 'middle':
                routes = collections.defaultdict(lambda: collections.defaultdict(float))
                for s in servers:
                    routes[(s[3], s[5] // 10**9 // W * W)][s[2] + ' ' + s[6]] += 1 / W
                with open(csv_out, 'w') as f:
                    f.write('period,machine,capacity_mhz,cpu_utilization,flow,rate,process\n')
                    for i, w in enumerate(wins):
                        for p in sorted({p for p, _ in read}):
                            if (p, w) in read and routes[(p, w)]:
                                u = sum(read[(p, w)]) / len(read[(p, w)])
                                for flow, rate in sorted(routes[(p, w)].items()):
                                    f.write(f'{i + 1},vm,{omega},{u},{flow},{rate:g},{p}\n')


if __name__ == '__main__':
    main(*sys.argv[1:4])
