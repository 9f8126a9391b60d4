# Top stall locations in an Nsight Compute source page (CSV from `ncu -i R --page source --csv --print-source sass`): usage sass_top.py FILE [N]
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
ix = {h:i for i,h in enumerate(hdr)}
S = ix["Warp Stall Sampling (All Samples)"]
stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
def num(x):
    try: return float(x)
    except: return 0.0
tot = sum(num(r[S]) for r in data)
print("total samples", tot)
agg = {h: sum(num(r[ix[h]]) for r in data) for h in stalls}
print(sorted(((round(v/tot*100,1),k) for k,v in agg.items() if v), reverse=True))
n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
# keep index to show context
order = sorted(range(len(data)), key=lambda i: -num(data[i][S]))[:n]
for i in sorted(order):
    r = data[i]
    top = sorted(((num(r[ix[h]]),h[6:]) for h in stalls if num(r[ix[h]])), reverse=True)[:3]
    print(i, r[0][-5:], r[1].strip()[:60].ljust(60), int(num(r[S])), r[ix["Instructions Executed"]], top)
