package conformance

// The formatting of a schema validator's error into a RuleSchema
// violation's message: how the checker words a failure, kept apart from
// the rules in checker.go.

import (
	"slices"
	"strings"
)

// oneLine flattens a validator error into one bounded line. A union's
// error lists why every variant failed, which buries the one cause that
// matters, so a tree of "- at 'PATH': MSG" lines (the format of the
// project's schema validator) is pruned to the variants whose discriminator
// matched; any other text is only flattened.
func oneLine(err error) string {
	s := err.Error()
	if causes := schemaCauses(s); len(causes) > 0 {
		s = strings.Join(causes, "; ")
	}
	s = strings.Join(strings.Fields(s), " ")
	const limit = 400
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

type errNode struct {
	text     string
	children []*errNode
}

func schemaCauses(s string) []string {
	root := &errNode{}
	stack := []*errNode{root}
	indents := []int{-1}
	for _, line := range strings.Split(s, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if !strings.HasPrefix(trimmed, "- at '") {
			continue
		}
		indent := len(line) - len(trimmed)
		for len(indents) > 1 && indents[len(indents)-1] >= indent {
			stack, indents = stack[:len(stack)-1], indents[:len(indents)-1]
		}
		n := &errNode{text: tidyCause(strings.TrimPrefix(trimmed, "- at "))}
		parent := stack[len(stack)-1]
		parent.children = append(parent.children, n)
		stack, indents = append(stack, n), append(indents, indent)
	}
	if len(root.children) == 0 {
		return nil
	}
	if causes := dedupe(root.leaves(true)); len(causes) > 0 {
		return causes
	}
	// Every variant was ruled out by its discriminator, e.g. an unknown
	// sessionUpdate in v1: list what the discriminator may be.
	var out []string
	allowed := map[string][]string{}
	for _, l := range dedupe(root.leaves(false)) {
		path, msg, _ := strings.Cut(l, ": ")
		if v, ok := strings.CutPrefix(msg, "value must be "); ok {
			if _, seen := allowed[path]; !seen {
				out = append(out, path)
			}
			allowed[path] = append(allowed[path], v)
		}
	}
	for i, path := range out {
		out[i] = path + ": must be one of " + strings.Join(allowed[path], ", ")
	}
	return out
}

// tidyCause turns "'/update/summary': got string" into
// "params/update/summary: got string": the validated document is the
// session/update params.
func tidyCause(s string) string {
	if path, msg, ok := strings.Cut(strings.TrimPrefix(s, "'"), "': "); ok {
		return "params" + path + ": " + msg
	}
	return s
}

// isDiscriminatorMismatch spots the leaf that rules a union variant out: a
// const that does not match, or (v2) the catch-all variant's "not any
// known value".
func isDiscriminatorMismatch(n *errNode) bool {
	return len(n.children) == 0 && (strings.Contains(n.text, "value must be '") || strings.HasSuffix(n.text, "'not' failed"))
}

// leaves returns the deepest causes. With prune, a conjunction that
// includes a const mismatch is a variant of a union that does not apply
// and contributes nothing.
func (n *errNode) leaves(prune bool) []string {
	if len(n.children) == 0 {
		if prune && isDiscriminatorMismatch(n) {
			return nil
		}
		return []string{n.text}
	}
	union := strings.Contains(n.text, "'oneOf' failed") || strings.Contains(n.text, "'anyOf' failed")
	var out []string
	for _, c := range n.children {
		if prune && !union && isDiscriminatorMismatch(c) {
			return nil
		}
		out = append(out, c.leaves(prune)...)
	}
	return out
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
