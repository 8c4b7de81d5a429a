package script

import (
	"strconv"

	"go.starlark.net/syntax"
)

// The rewrite routes every expression that can grow a value through a
// checked builtin before the program is compiled, so the memory budget sees
// an allocation before it happens:
//
//	x + y, x * y, x % y, x | y   ->  $+(x, y), $*(x, y), ...
//	x += y (and *=, %=, |=)      ->  x += $+=(x, y)   (checks, returns y)
//	x[lo:hi:step]                ->  $slice(x, lo, hi, step)
//	s.join(l), l.extend(m), ...  ->  $method(s, "join", l), ...
//	f = s.join                   ->  f = $attr(s, "join")   (a charged method value)
//	[e for ...], {k: v for ...}  ->  [$elem(e) for ...], {k: $entry(v) for ...}
//
// The injected names start with '$', which no script can write, so a script
// can neither call nor shadow them. Evaluation order is unchanged: an
// augmented assignment to an index or attribute evaluates its operands once
// into '$' temporaries.

// Names of the injected builtins.
const (
	rwMethod = "$method"
	rwAttr   = "$attr"
	rwSlice  = "$slice"
	rwElem   = "$elem"
	rwEntry  = "$entry"
)

// checkedOps are the binary operators whose result can be larger than their operands.
var checkedOps = map[syntax.Token]bool{syntax.PLUS: true, syntax.STAR: true, syntax.PERCENT: true, syntax.PIPE: true}

// augOps maps an augmented assignment to its binary operator.
var augOps = map[syntax.Token]syntax.Token{syntax.PLUS_EQ: syntax.PLUS, syntax.STAR_EQ: syntax.STAR,
	syntax.PERCENT_EQ: syntax.PERCENT, syntax.PIPE_EQ: syntax.PIPE}

// growthMethods are the methods of built-in types that allocate in proportion to their arguments.
var growthMethods = map[string]bool{"add": true, "union": true, "difference": true, "intersection": true,
	"symmetric_difference": true, "append": true, "insert": true, "extend": true, "update": true, "setdefault": true,
	"items": true, "keys": true, "values": true, "join": true, "replace": true, "format": true, "upper": true,
	"lower": true, "title": true, "capitalize": true, "strip": true, "lstrip": true, "rstrip": true,
	"removeprefix": true, "removesuffix": true, "split": true, "rsplit": true, "splitlines": true,
	"partition": true, "rpartition": true}

func opName(op syntax.Token) string  { return "$" + op.String() }
func augName(op syntax.Token) string { return "$" + op.String() + "=" }
func ident(name string, pos syntax.Position) *syntax.Ident {
	return &syntax.Ident{NamePos: pos, Name: name}
}

func call(name string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: ident(name, pos), Lparen: pos, Args: args, Rparen: pos}
}

func none(e syntax.Expr, pos syntax.Position) syntax.Expr {
	if e == nil {
		return ident("None", pos)
	}
	return e
}

type rewriter struct{ temps int }

func (w *rewriter) temp(pos syntax.Position) *syntax.Ident {
	w.temps++
	return ident("$t"+strconv.Itoa(w.temps), pos)
}

func (w *rewriter) file(f *syntax.File) { f.Stmts = w.stmts(f.Stmts) }

func (w *rewriter) stmts(in []syntax.Stmt) []syntax.Stmt {
	out := make([]syntax.Stmt, 0, len(in))
	for _, s := range in {
		out = append(out, w.stmt(s)...)
	}
	return out
}

func (w *rewriter) stmt(s syntax.Stmt) []syntax.Stmt {
	switch s := s.(type) {
	case *syntax.ExprStmt:
		s.X = w.expr(s.X)
	case *syntax.AssignStmt:
		return w.assign(s)
	case *syntax.DefStmt:
		w.params(s.Params)
		s.Body = w.stmts(s.Body)
	case *syntax.ForStmt:
		s.Vars = w.lhs(s.Vars)
		s.X = w.expr(s.X)
		s.Body = w.stmts(s.Body)
	case *syntax.WhileStmt:
		s.Cond = w.expr(s.Cond)
		s.Body = w.stmts(s.Body)
	case *syntax.IfStmt:
		s.Cond = w.expr(s.Cond)
		s.True = w.stmts(s.True)
		s.False = w.stmts(s.False)
	case *syntax.ReturnStmt:
		s.Result = w.expr(s.Result)
	}
	return []syntax.Stmt{s}
}

func (w *rewriter) assign(s *syntax.AssignStmt) []syntax.Stmt {
	op, checked := augOps[s.Op]
	if !checked {
		s.LHS = w.lhs(s.LHS)
		s.RHS = w.expr(s.RHS)
		return []syntax.Stmt{s}
	}
	pos := s.OpPos
	lhs := s.LHS
	for {
		p, ok := lhs.(*syntax.ParenExpr)
		if !ok {
			break
		}
		lhs = p.X
	}
	rhs := w.expr(s.RHS)
	switch l := lhs.(type) {
	case *syntax.Ident:
		s.LHS = l
		s.RHS = call(augName(op), pos, ident(l.Name, l.NamePos), rhs)
		return []syntax.Stmt{s}
	case *syntax.IndexExpr:
		// a[i] op= v  ->  $o = a; $i = i; $o[$i] op= $op=($o[$i], v)
		o, i := w.temp(pos), w.temp(pos)
		pre := []syntax.Stmt{
			&syntax.AssignStmt{OpPos: pos, Op: syntax.EQ, LHS: o, RHS: w.expr(l.X)},
			&syntax.AssignStmt{OpPos: pos, Op: syntax.EQ, LHS: i, RHS: w.expr(l.Y)},
		}
		at := func() *syntax.IndexExpr {
			return &syntax.IndexExpr{X: ident(o.Name, pos), Lbrack: l.Lbrack, Y: ident(i.Name, pos), Rbrack: l.Rbrack}
		}
		s.LHS = at()
		s.RHS = call(augName(op), pos, at(), rhs)
		return append(pre, s)
	case *syntax.DotExpr:
		o := w.temp(pos)
		pre := &syntax.AssignStmt{OpPos: pos, Op: syntax.EQ, LHS: o, RHS: w.expr(l.X)}
		at := func() *syntax.DotExpr {
			return &syntax.DotExpr{X: ident(o.Name, pos), Dot: l.Dot, NamePos: l.NamePos, Name: ident(l.Name.Name, l.NamePos)}
		}
		s.LHS = at()
		s.RHS = call(augName(op), pos, at(), rhs)
		return []syntax.Stmt{pre, s}
	}
	// Anything else is not assignable: let the compiler say so.
	s.RHS = rhs
	return []syntax.Stmt{s}
}

// lhs rewrites the operands inside an assignment target, not the target.
func (w *rewriter) lhs(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.ParenExpr:
		e.X = w.lhs(e.X)
	case *syntax.TupleExpr:
		for i := range e.List {
			e.List[i] = w.lhs(e.List[i])
		}
	case *syntax.ListExpr:
		for i := range e.List {
			e.List[i] = w.lhs(e.List[i])
		}
	case *syntax.IndexExpr:
		e.X = w.expr(e.X)
		e.Y = w.expr(e.Y)
	case *syntax.DotExpr:
		e.X = w.expr(e.X)
	}
	return e
}

// params rewrites the default values of parameters.
func (w *rewriter) params(ps []syntax.Expr) {
	for _, p := range ps {
		if b, ok := p.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			b.Y = w.expr(b.Y)
		}
	}
}

// args rewrites call arguments: name=value, *args, **kwargs and plain ones.
func (w *rewriter) args(as []syntax.Expr) {
	for i, a := range as {
		switch a := a.(type) {
		case *syntax.BinaryExpr:
			if a.Op == syntax.EQ {
				a.Y = w.expr(a.Y)
				continue
			}
		case *syntax.UnaryExpr:
			if a.Op == syntax.STAR || a.Op == syntax.STARSTAR {
				a.X = w.expr(a.X)
				continue
			}
		}
		as[i] = w.expr(a)
	}
}

func (w *rewriter) expr(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case nil:
		return nil
	case *syntax.ParenExpr:
		e.X = w.expr(e.X)
	case *syntax.BinaryExpr:
		e.X = w.expr(e.X)
		e.Y = w.expr(e.Y)
		if checkedOps[e.Op] {
			return call(opName(e.Op), e.OpPos, e.X, e.Y)
		}
	case *syntax.UnaryExpr:
		e.X = w.expr(e.X)
	case *syntax.CallExpr:
		w.args(e.Args)
		if d, ok := e.Fn.(*syntax.DotExpr); ok && growthMethods[d.Name.Name] {
			name := &syntax.Literal{Token: syntax.STRING, TokenPos: d.NamePos, Raw: strconv.Quote(d.Name.Name), Value: d.Name.Name}
			args := append([]syntax.Expr{w.expr(d.X), name}, e.Args...)
			return &syntax.CallExpr{Fn: ident(rwMethod, d.NamePos), Lparen: e.Lparen, Args: args, Rparen: e.Rparen}
		}
		e.Fn = w.expr(e.Fn)
	case *syntax.DotExpr:
		e.X = w.expr(e.X)
		if growthMethods[e.Name.Name] {
			// A growth method taken as a value (f = s.join) is charged when called.
			name := &syntax.Literal{Token: syntax.STRING, TokenPos: e.NamePos, Raw: strconv.Quote(e.Name.Name), Value: e.Name.Name}
			return call(rwAttr, e.NamePos, e.X, name)
		}
	case *syntax.IndexExpr:
		e.X = w.expr(e.X)
		e.Y = w.expr(e.Y)
	case *syntax.SliceExpr:
		pos := e.Lbrack
		return call(rwSlice, pos, w.expr(e.X), none(w.expr(e.Lo), pos), none(w.expr(e.Hi), pos), none(w.expr(e.Step), pos))
	case *syntax.ListExpr:
		for i := range e.List {
			e.List[i] = w.expr(e.List[i])
		}
	case *syntax.TupleExpr:
		for i := range e.List {
			e.List[i] = w.expr(e.List[i])
		}
	case *syntax.DictExpr:
		for _, x := range e.List {
			if de, ok := x.(*syntax.DictEntry); ok {
				de.Key = w.expr(de.Key)
				de.Value = w.expr(de.Value)
			}
		}
	case *syntax.CondExpr:
		e.Cond = w.expr(e.Cond)
		e.True = w.expr(e.True)
		e.False = w.expr(e.False)
	case *syntax.LambdaExpr:
		w.params(e.Params)
		e.Body = w.expr(e.Body)
	case *syntax.Comprehension:
		for _, c := range e.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				c.Vars = w.lhs(c.Vars)
				c.X = w.expr(c.X)
			case *syntax.IfClause:
				c.Cond = w.expr(c.Cond)
			}
		}
		if de, ok := e.Body.(*syntax.DictEntry); ok {
			de.Key = w.expr(de.Key)
			de.Value = call(rwEntry, de.Colon, w.expr(de.Value))
		} else {
			e.Body = call(rwElem, e.Lbrack, w.expr(e.Body))
		}
	}
	return e
}
