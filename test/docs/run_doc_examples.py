#!/usr/bin/env python3
"""test/docs/run_doc_examples.py: a PROTOTYPE, not wired into ctest. Runs the marked examples of
docs/fenecql.md against a running node, or the sh blocks of docs/getting-started.md in one bash,
by the conventions each page states in its opening HTML comment, and prints every example whose
answer differs. It is how the pages were checked by hand; the test proposed to replace it is a
GoogleTest beside test/ql/golden_test.cc (fenecql.md) and a ctest-run shell runner (the sh page).

usage: run_doc_examples.py fenecql docs/fenecql.md http://127.0.0.1:<port> <admin-token> <tenant>
           (the tenant created empty first: PUT /_admin/tenants/<tenant>)
       run_doc_examples.py sh docs/getting-started.md   (from the checkout's root; ports 8080-8082)"""
import json, re, sys, subprocess, urllib.request, urllib.error

def blocks(md):
    out = []; lines = open(md, encoding='utf-8').read().split('\n'); i = 0
    while i < len(lines):
        m = re.match(r'^```(\S.*)?$', lines[i])
        if m and m.group(1):
            info = m.group(1).split(); body = []; i += 1
            while not lines[i].startswith('```'):
                body.append(lines[i]); i += 1
            out.append((info, '\n'.join(body), i))
        i += 1
    return out

def pairs(x):
    return json.loads(x, object_pairs_hook=lambda p: ('obj', p))

def same(exp, act, path='$'):
    if exp == '…': return None
    if isinstance(exp, tuple):
        if not isinstance(act, tuple): return f'{path}: object expected'
        ek = [k for k, _ in exp[1]]; ak = [k for k, _ in act[1]]
        if ek != ak: return f'{path}: keys {ek} != {ak}'
        for (k, e), (_, a) in zip(exp[1], act[1]):
            r = same(e, a, path + '.' + k)
            if r: return r
        return None
    if isinstance(exp, list):
        if not isinstance(act, list) or len(exp) != len(act): return f'{path}: list {exp} != {act}'
        for n, (e, a) in enumerate(zip(exp, act)):
            r = same(e, a, f'{path}[{n}]')
            if r: return r
        return None
    if isinstance(exp, float) or isinstance(act, float):
        if type(exp) != type(act) and not (isinstance(exp, (int, float)) and isinstance(act, (int, float)) and type(exp) == type(act)):
            return f'{path}: {exp!r} ({type(exp).__name__}) != {act!r} ({type(act).__name__})'
        if abs(exp - act) > 1e-9 * max(abs(exp), abs(act)): return f'{path}: {exp!r} != {act!r}'
        return None
    if type(exp) != type(act) or exp != act: return f'{path}: {exp!r} != {act!r}'
    return None

def post(url, body, token=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method='POST',
                                 headers={'Content-Type': 'application/json'})
    if token: req.add_header('Authorization', 'Bearer ' + token)
    try:
        with urllib.request.urlopen(req) as r: return r.status, r.read().decode()
    except urllib.error.HTTPError as e: return e.code, e.read().decode()

def run_fenecql(md, node, token, tenant):
    bs = blocks(md); fails = 0; n = 0
    for k, (info, text, line) in enumerate(bs):
        if info[0] != 'fenecql': continue
        n += 1
        params = None
        for l in text.split('\n'):
            if l.strip().startswith('-- params:'): params = json.loads(l.split(':', 1)[1])
        body = {'query': text}
        if params is not None: body['params'] = params
        admin = 'admin' in info[1:]
        url = f'{node}/_admin/tenants/{tenant}/query' if admin else f'{node}/t/{tenant}/query'
        status, got = post(url, body, token if admin else None)
        exp_info, exp_text, _ = bs[k + 1]
        want = 200
        for a in exp_info[1:]:
            if a.startswith('status='): want = int(a[7:])
        err = None
        if status != want: err = f'status {status} != {want}'
        elif want == 200: err = same(pairs(exp_text), pairs(got))
        else:
            e = json.loads(exp_text); g = json.loads(got)
            for key, v in e.items():
                if key == 'error': continue
                if g.get(key, '<absent>') != v: err = f'member {key}: {g.get(key, "<absent>")!r} != {v!r}'
        if err:
            fails += 1
            print(f'line {line}: {text!r}\n  {err}\n  got {status} {got}\n')
    print(f'{n} statements, {fails} differ')

def text_same(exp, act):
    el = exp.split('\n'); al = act.split('\n')
    if len(el) != len(al): return f'{len(el)} lines expected, {len(al)} got'
    for e, a in zip(el, al):
        rx = '^' + '.*'.join(re.escape(p) for p in e.split('…')) + '$'
        if not re.match(rx, a): return f'line {e!r} != {a!r}'
    return None

def run_sh(md):
    bs = blocks(md); script = []; plan = []
    for k, (info, text, line) in enumerate(bs):
        if info[0] != 'sh' or 'no-run' in info[1:]: continue
        exp = bs[k + 1] if k + 1 < len(bs) and bs[k + 1][0][0] in ('json', 'text') else None
        i = len(plan); plan.append((line, text, exp))
        script.append(f'echo "@@@BEGIN {i}"\n{text}\necho "@@@END {i} $?"')
    out = subprocess.run(['bash', '-c', '\n'.join(script)], capture_output=True, text=True).stdout
    fails = 0
    for i, (line, text, exp) in enumerate(plan):
        m = re.search(rf'@@@BEGIN {i}\n(.*?)@@@END {i} (\d+)\n', out, re.S)
        if not m: print(f'line {line}: no output'); fails += 1; continue
        got, rc = m.group(1), int(m.group(2))
        err = None
        if rc != 0: err = f'exit {rc}'
        elif exp:
            if exp[0][0] == 'json':
                try: err = same(pairs(exp[1]), pairs(got))
                except Exception as x: err = f'not JSON: {x}'
            else: err = text_same(exp[1].rstrip('\n'), got.rstrip('\n'))
        if err:
            fails += 1; print(f'line {line}: {text[:80]!r}\n  {err}\n  got: {got}\n')
    print(f'{len(plan)} blocks, {fails} differ')

if sys.argv[1] == 'fenecql': run_fenecql(*sys.argv[2:6])
else: run_sh(sys.argv[2])
