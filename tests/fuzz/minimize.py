"""Greedy reduction of a failing program on its Python AST.

``minimize(src, still_fails)`` deletes statements (chunks first, then one by one), replaces
compound statements (if/for/while/try/with/match) by one of their bodies, and simplifies
expressions (an operation by one of its operands, a call by one of its arguments or by its
receiver, a container literal without one item, a keyword argument dropped), keeping each
change only while ``still_fails(candidate_src)`` is true. ``make_inputs`` and the name and
parameters of ``f`` are never changed. The result is the smallest program found when no
change is accepted any more, or when the time or run budget is spent.
"""
from __future__ import annotations

import ast
import copy
import time

PROTECTED_DEFS = ("make_inputs",)
STMT_LISTS = ("body", "orelse", "finalbody")


def _protected(node) -> bool:
    return isinstance(node, ast.FunctionDef) and node.name in PROTECTED_DEFS


def _stmt_lists(tree):
    """Paths to every statement list outside make_inputs: (node path, field name)."""
    out = []

    def visit(node, path):
        if _protected(node):
            return
        for field in STMT_LISTS:
            lst = getattr(node, field, None)
            if isinstance(lst, list) and lst and isinstance(lst[0], ast.stmt):
                out.append((path, field))
                for i, child in enumerate(lst):
                    visit(child, path + [(field, i)])
        for i, h in enumerate(getattr(node, "handlers", []) or []):
            out.append((path + [("handlers", i)], "body"))
            for j, child in enumerate(h.body):
                visit(child, path + [("handlers", i), ("body", j)])
        for i, c in enumerate(getattr(node, "cases", []) or []):
            out.append((path + [("cases", i)], "body"))
            for j, child in enumerate(c.body):
                visit(child, path + [("cases", i), ("body", j)])

    visit(tree, [])
    return out


def _get(tree, path):
    node = tree
    for field, idx in path:
        node = getattr(node, field)
        if idx is not None:
            node = node[idx]
    return node


def _unparse(tree):
    try:
        src = ast.unparse(ast.fix_missing_locations(tree))
        compile(src, "<candidate>", "exec")
        return src + "\n"
    except (SyntaxError, ValueError, TypeError, AttributeError, RecursionError):
        return None


def _is_f_or_protected(stmt) -> bool:
    return isinstance(stmt, ast.FunctionDef) and stmt.name in PROTECTED_DEFS + ("f",)


def _deletions(tree):
    """Candidates deleting a chunk of statements: halves, quarters, ..., single ones."""
    for path, field in _stmt_lists(tree):
        lst = getattr(_get(tree, path), field)
        n = len(lst)
        size = n // 2 if n > 3 else 1
        while size >= 1:
            for start in range(0, n, size):
                stop = min(start + size, n)
                if any(_is_f_or_protected(s) for s in lst[start:stop]):
                    continue
                yield ("del", path, field, start, stop)
            size //= 2


def _hoists(tree):
    """Candidates replacing a compound statement by one of its bodies."""
    for path, field in _stmt_lists(tree):
        lst = getattr(_get(tree, path), field)
        for i, s in enumerate(lst):
            if isinstance(s, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                yield ("hoist", path, field, i, "body")
                if getattr(s, "orelse", None):
                    yield ("hoist", path, field, i, "orelse")
                if isinstance(s, ast.Try):
                    for h in range(len(s.handlers)):
                        yield ("hoist", path, field, i, ("handler", h))
                    if s.finalbody:
                        yield ("hoist", path, field, i, "finalbody")
                    if s.orelse:
                        yield ("drop", path, field, i, "orelse")
                    if s.finalbody and s.handlers:
                        yield ("drop", path, field, i, "finalbody")
                    if len(s.handlers) > 1:
                        for h in range(len(s.handlers)):
                            yield ("drop", path, field, i, ("handler", h))
                if isinstance(s, ast.If) and s.orelse:
                    yield ("drop", path, field, i, "orelse")
            if isinstance(s, ast.Match):
                for c in range(len(s.cases)):
                    yield ("hoist", path, field, i, ("case", c))


def _apply_stmt_edit(tree, edit):
    kind, path, field, i, what = edit
    lst = getattr(_get(tree, path), field)
    if kind == "del":
        del lst[i:what]
        if not lst and field == "body":
            lst.append(ast.Pass())
        return
    s = lst[i]
    if kind == "hoist":
        if what in ("body", "orelse", "finalbody"):
            new = getattr(s, what)
        elif what[0] == "handler":
            new = s.handlers[what[1]].body
        else:
            new = s.cases[what[1]].body
        lst[i:i + 1] = new or [ast.Pass()]
        return
    # drop an optional part
    if what == "orelse":
        s.orelse = []
    elif what == "finalbody":
        s.finalbody = []
    else:
        del s.handlers[what[1]]


def _f_and_inputs(tree):
    """f's FunctionDef and make_inputs' `args = (...)` tuple and `kwargs = {...}` dict."""
    f = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "f"), None)
    mi = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_inputs"), None)
    args = kwargs = None
    for st in getattr(mi, "body", []):
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
            if st.targets[0].id == "args" and isinstance(st.value, ast.Tuple):
                args = st.value
            if st.targets[0].id == "kwargs" and isinstance(st.value, ast.Dict):
                kwargs = st.value
    return f, args, kwargs


def _param_edits(tree):
    """Candidates removing one of f's parameters together with its input in make_inputs."""
    f, args, kwargs = _f_and_inputs(tree)
    if f is None or args is None or kwargs is None:
        return
    for i in range(len(f.args.args)):
        yield ("pos", i)
    if f.args.vararg:
        yield ("vararg", 0)
    for i in range(len(f.args.kwonlyargs)):
        yield ("kwonly", i)
    if f.args.kwarg:
        yield ("kwarg", 0)


def _helper_param_edits(tree):
    """Candidates removing a parameter with a default (or *args, **kw) from a helper function
    (not f, not make_inputs); a call that passes it then fails and the candidate is dropped."""
    for idx, node in enumerate(ast.walk(tree)):
        if isinstance(node, ast.FunctionDef) and node.name not in ("f",) + PROTECTED_DEFS:
            a = node.args
            first_default = len(a.args) - len(a.defaults)
            for i in range(first_default, len(a.args)):
                yield ("helper", idx, "pos", i)
            for i in range(len(a.kwonlyargs)):
                yield ("helper", idx, "kwonly", i)
            if a.vararg:
                yield ("helper", idx, "vararg", 0)
            if a.kwarg:
                yield ("helper", idx, "kwarg", 0)


def _apply_param_edit(tree, edit):
    if edit[0] == "helper":
        _, idx, kind, i = edit
        node = next(n for j, n in enumerate(ast.walk(tree)) if j == idx)
        a = node.args
        if kind == "pos":
            del a.defaults[i - (len(a.args) - len(a.defaults))]
            del a.args[i]
        elif kind == "kwonly":
            del a.kwonlyargs[i]
            del a.kw_defaults[i]
        elif kind == "vararg":
            a.vararg = None
        else:
            a.kwarg = None
        return
    f, args, kwargs = _f_and_inputs(tree)
    kind, i = edit
    a = f.args
    npos = len(a.args)
    if kind == "pos":
        first_default = npos - len(a.defaults)
        if i >= first_default:
            del a.defaults[i - first_default]
        del a.args[i]
        if i < len(args.elts):
            del args.elts[i]
    elif kind == "vararg":
        a.vararg = None
        del args.elts[npos:]
    elif kind == "kwonly":
        name = a.kwonlyargs[i].arg
        del a.kwonlyargs[i]
        del a.kw_defaults[i]
        _drop_keys(kwargs, lambda k: k == name)
    else:
        a.kwarg = None
        names = {p.arg for p in a.kwonlyargs}
        _drop_keys(kwargs, lambda k: k not in names)


def _drop_keys(d, pred):
    keep = [(k, v) for k, v in zip(d.keys, d.values)
            if not (isinstance(k, ast.Constant) and pred(k.value))]
    d.keys = [k for k, _ in keep]
    d.values = [v for _, v in keep]


def _expr_sites(tree):
    """Paths of expressions that may be simplified (outside make_inputs and defs' signatures)."""
    out = []

    def visit(node, path):
        if _protected(node):
            return
        for field, value in ast.iter_fields(node):
            if field in ("args", "decorator_list", "returns") and isinstance(node, (ast.FunctionDef, ast.Lambda)):
                continue
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, ast.AST):
                        if isinstance(v, ast.expr):
                            out.append(path + [(field, i)])
                        visit(v, path + [(field, i)])
            elif isinstance(value, ast.AST):
                if isinstance(value, ast.expr):
                    out.append(path + [(field, None)])
                visit(value, path + [(field, None)])

    visit(tree, [])
    return out


def _expr_replacements(node):
    """Simpler expressions that could stand for node (with a short label)."""
    if isinstance(node, ast.BinOp):
        yield node.left
        yield node.right
    elif isinstance(node, ast.UnaryOp):
        yield node.operand
    elif isinstance(node, ast.BoolOp):
        yield from node.values
    elif isinstance(node, ast.IfExp):
        yield node.body
        yield node.orelse
    elif isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and not isinstance(node.func.value, ast.Name) or \
                isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and \
                node.func.value.id not in ("torch", "math", "functools", "contextlib"):
            yield node.func.value
        for a in node.args:
            if not isinstance(a, ast.Starred):
                yield a
        for i in range(len(node.keywords)):
            c = copy.deepcopy(node)
            del c.keywords[i]
            yield c
        if len(node.args) > 1:
            c = copy.deepcopy(node)
            del c.args[-1]
            yield c
    elif isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) > 1 and isinstance(node.ctx, ast.Load):
        for i in range(len(node.elts)):
            c = copy.deepcopy(node)
            del c.elts[i]
            yield c
    elif isinstance(node, ast.Dict) and len(node.keys) > 1:
        for i in range(len(node.keys)):
            c = copy.deepcopy(node)
            del c.keys[i]
            del c.values[i]
            yield c
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        yield node.value
    elif isinstance(node, ast.Compare) and len(node.comparators) == 1:
        yield ast.Constant(True)
        yield ast.Constant(False)
    elif isinstance(node, ast.Constant) and isinstance(node.value, float) and node.value not in (0.0, 1.0):
        yield ast.Constant(1.0)
    elif isinstance(node, ast.JoinedStr):
        yield ast.Constant("s")


def _set(tree, path, new):
    parent = _get(tree, path[:-1])
    field, idx = path[-1]
    if idx is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[idx] = new


def minimize(src: str, still_fails, budget_s: float = 300.0, max_runs: int = 2000, log=None):
    """The smallest variant of src found for which still_fails(variant) holds.

    still_fails: callable(src) -> bool; src is assumed to fail. budget_s / max_runs bound the
    work; log, if given, is called with a line per accepted change."""
    best = ast.parse(src)
    best_src = _unparse(copy.deepcopy(best)) or src
    if not still_fails(best_src):   # the unparsed text must fail as the original did
        return src
    t_end = time.monotonic() + budget_s
    runs = 0
    seen = {best_src}

    def attempt(candidate_tree):
        nonlocal best, best_src, runs
        s = _unparse(candidate_tree)
        if s is None or s in seen:
            return False
        seen.add(s)
        runs += 1
        if still_fails(s):
            best, best_src = ast.parse(s), s
            if log:
                log(f"  reduced to {len(s.splitlines())} lines")
            return True
        return False

    def out_of_budget():
        return time.monotonic() > t_end or runs >= max_runs

    changed = True
    while changed and not out_of_budget():
        changed = False
        for gen, apply in ((_deletions, _apply_stmt_edit), (_hoists, _apply_stmt_edit),
                           (_param_edits, _apply_param_edit), (_helper_param_edits, _apply_param_edit)):
            progress = True
            while progress and not out_of_budget():
                progress = False
                for edit in list(gen(best)):
                    if out_of_budget():
                        break
                    cand = copy.deepcopy(best)
                    try:
                        apply(cand, edit)
                    except (IndexError, AttributeError, TypeError):
                        continue
                    if attempt(cand):
                        progress = changed = True
                        break
        # expressions: one site at a time, re-enumerating after each accepted change
        progress = True
        while progress and not out_of_budget():
            progress = False
            for path in _expr_sites(best):
                try:
                    node = _get(best, path)
                except (IndexError, AttributeError):
                    continue
                for rep in list(_expr_replacements(node)):
                    if out_of_budget():
                        break
                    cand = copy.deepcopy(best)
                    _set(cand, path, copy.deepcopy(rep))
                    if attempt(cand):
                        progress = changed = True
                        break
                if progress or out_of_budget():
                    break
    return best_src
