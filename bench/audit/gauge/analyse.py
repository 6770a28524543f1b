# Each gauged audit's CPU a request and mean excess against the gauge's unit of work in
# the audit's 20 s (the last 20.5 s before the client wrote its results, less one).
import json, os, statistics as st, sys, math
root = sys.argv[1]
off = int(open(f'{root}/offset').read())  # wall clock minus CLOCK_MONOTONIC, ns
rows = []
for i in range(1, 100):
    j = f'{root}/o{i}/sglang-100.json'
    if not os.path.exists(j): continue
    d = json.load(open(j))
    o = d['observed']
    end = os.path.getmtime(f'{root}/o{i}/sglang-100/client-out/sglang-result.json') * 1e9
    lo, hi = end - 21.5e9, end - 1.0e9
    g = [tuple(map(int, l.split())) for l in open(f'{root}/g{i}.txt') if l.strip()]
    w = [(c, m) for (t, c, m) in g if lo <= t + off <= hi]
    allg = [(c, m) for (t, c, m) in g]
    cpu = d['prediction']['cpu_per_request_s']
    ex = o['paired_excess']['mean_s']; p99 = o['paired_excess']['p99_s']
    rows.append((i, cpu*1e3, ex*1e3, p99*1e3, st.median(c for c, m in w)/1e3, st.median(m for c, m in w)/1e3,
                 st.mean(c for c, m in w)/1e3, len(w), st.median(c for c,m in allg)/1e3))
print("i cpu/req_ms excess_ms p99_ms g_comp_med_us g_mem_med_us g_comp_mean_us n g_all_med")
for r in rows: print(' '.join(f'{x:.3f}' if isinstance(x, float) else str(x) for x in r))
def corr(a, b):
    ma, mb = st.mean(a), st.mean(b)
    return sum((x-ma)*(y-mb) for x, y in zip(a, b)) / math.sqrt(sum((x-ma)**2 for x in a) * sum((y-mb)**2 for y in b))
def rank(a):
    s = sorted(range(len(a)), key=lambda k: a[k]); r = [0]*len(a)
    for n, k in enumerate(s): r[k] = n
    return r
cols = list(zip(*rows))
for name, k in [('g_comp_med', 4), ('g_mem_med', 5), ('g_comp_mean', 6), ('g_all_med', 8)]:
    print(name, 'vs cpu/req r=%.2f rho=%.2f' % (corr(cols[1], cols[k]), corr(rank(cols[1]), rank(cols[k]))),
          ' vs excess r=%.2f rho=%.2f' % (corr(cols[2], cols[k]), corr(rank(cols[2]), rank(cols[k]))))
print('cpu/req vs excess r=%.2f' % corr(cols[1], cols[2]))
def fit(x, y):
    lx = [math.log(v) for v in x]; ly = [math.log(v) for v in y]
    mx, my = st.mean(lx), st.mean(ly)
    e = sum((a-mx)*(b-my) for a, b in zip(lx, ly)) / sum((a-mx)**2 for a in lx)
    res = [b - (my + e*(a-mx)) for a, b in zip(lx, ly)]
    return e, st.pstdev(res), st.pstdev(ly)
for k in (4, 6, 8):
    e, r, s = fit(cols[k], cols[1]); e2, r2, s2 = fit(cols[k], cols[2])
    print(f'col{k}: cpu ~ g^{e:.2f} resid sd {r:.3f} (raw {s:.3f});  excess ~ g^{e2:.2f} resid {r2:.3f} (raw {s2:.3f})')
# Each run's mean and p99 excess foretold from the other runs alone: their geometric mean,
# and the same scaled by the gauge as the others' fit on the gauge's median says.
for name, k in (('mean', 2), ('p99', 3)):
    plain, gauged = [], []
    for i in range(len(rows)):
        g = [cols[4][j] for j in range(len(rows)) if j != i]
        y = [cols[k][j] for j in range(len(rows)) if j != i]
        e, _, _ = fit(g, y)
        ly = st.mean(math.log(v) for v in y); lg = st.mean(math.log(v) for v in g)
        plain.append(math.exp(ly) / cols[k][i] - 1)
        gauged.append(math.exp(ly + e * (math.log(cols[4][i]) - lg)) / cols[k][i] - 1)
    med = lambda v: st.median(abs(x) for x in v)
    print(f'{name} excess, left out in turn: error without the gauge median {med(plain):.1%} max {max(map(abs, plain)):.1%}; '
          f'with it median {med(gauged):.1%} max {max(map(abs, gauged)):.1%}')
