package audit

import (
	"encoding/json"
	"path"
	"strings"
)

// extracted is one reference found in text: its kind, the value as written
// and the key that makes two spellings one reference.
type extracted struct {
	kind  Kind
	value string
	key   string
}

// maxTokenBytes bounds a token read as a reference: longer runs of
// non-space characters (base64, minified code) are no references.
const maxTokenBytes = 2048

// extractText finds the references in text, token by token.
func extractText(text string, emit func(extracted)) {
	var prev1, prev2 string // the two tokens before, lower case, trimmed
	fence := false
	i := 0
	for i < len(text) {
		for i < len(text) && isSpace(text[i]) {
			i++
		}
		j := i
		for j < len(text) && !isSpace(text[j]) {
			j++
		}
		if j == i {
			break
		}
		tok := text[i:j]
		i = j
		if strings.HasPrefix(tok, "```") || strings.HasPrefix(tok, "~~~") {
			fence = !fence
			prev1, prev2 = "", ""
			continue
		}
		if len(tok) > maxTokenBytes {
			prev1, prev2 = "", ""
			continue
		}
		if mayHoldReference(tok) {
			token(tok, prev1, prev2, !fence, emit)
		}
		prev2, prev1 = prev1, tok
	}
}

// mayHoldReference is a cheap first look at a token: one of letters and
// sentence punctuation alone holds no reference but an errno name (all
// capitals), so most prose is passed over without being read further.
func mayHoldReference(tok string) bool {
	upper := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c >= 'a' && c <= 'z':
		case c >= 'A' && c <= 'Z':
			upper++
		case c == ',' || c == ';' || c == '!' || c == '?' || c == '(' || c == ')' || c == '"' || c == '\'' || c == '*':
		default:
			return true
		}
	}
	return upper >= 4 || (upper == 1 && specialFiles[trimPunct(tok)])
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

const (
	leadPunct  = "([{<\"'*_,;|>"
	trailPunct = ")]}>\"'*_.,;:!?|`"
)

func trimPunct(t string) string {
	for len(t) > 0 && strings.IndexByte(leadPunct, t[0]) >= 0 {
		t = t[1:]
	}
	for _, q := range []string{"“", "‘", "«"} {
		t = strings.TrimPrefix(t, q)
	}
	for {
		n := len(t)
		for len(t) > 0 && strings.IndexByte(trailPunct, t[len(t)-1]) >= 0 {
			t = t[:len(t)-1]
		}
		for _, q := range []string{"”", "’", "»", "…"} {
			t = strings.TrimSuffix(t, q)
		}
		if len(t) == n {
			return t
		}
	}
}

// token reads one token: at most one reference (a markdown link gives its
// text and its target one each).
func token(tok, prev1, prev2 string, spans bool, emit func(extracted)) {
	t := strings.TrimLeft(tok, leadPunct)
	t = strings.TrimLeft(t, "“‘«")
	if strings.HasPrefix(t, "`") {
		if end := strings.IndexByte(t[1:], '`'); end > 0 {
			inner := t[1 : 1+end]
			if !reference(inner, prev1, prev2, emit) && spans {
				if e, ok := identifier(inner); ok {
					emit(e)
				}
			}
			return
		}
		t = strings.TrimLeft(t, "`")
	}
	if k, e := strings.IndexByte(t, '['), strings.IndexByte(t, ']'); k > 0 && e > k+1 && isAlpha(t[0]) {
		// rustc's "error[E0308]:", "warning[W0611]".
		if ec, ok := errorCode(t[k+1:e], "", ""); ok {
			emit(ec)
			return
		}
	}
	if k := strings.Index(t, "]("); k >= 0 {
		reference(trimPunct(strings.TrimLeft(t[:k], "[")), prev1, prev2, emit)
		target := t[k+2:]
		if c := strings.IndexByte(target, ')'); c >= 0 && !strings.Contains(target[:c], "(") {
			target = target[:c]
		}
		reference(target, "", "", emit)
		return
	}
	reference(t, prev1, prev2, emit)
}

// reference tries each grammar on a token in the package's order and
// reports whether one matched.
func reference(t, prev1, prev2 string, emit func(extracted)) bool {
	if u, ok := findURL(t); ok {
		emit(u)
		return true
	}
	t = trimPunct(t)
	if t == "" {
		return false
	}
	for _, f := range grammars {
		if e, ok := f(t, prev1, prev2); ok {
			emit(e)
			return true
		}
	}
	return false
}

var grammars = []func(t, prev1, prev2 string) (extracted, bool){issue, errorCode, hash, version, textPath}

// ---- url

var urlSchemes = []string{"https", "http", "file", "ftp", "ssh", "git", "wss", "ws"}

func findURL(t string) (extracted, bool) {
	k := strings.Index(t, "://")
	if k <= 0 {
		return extracted{}, false
	}
	start := k
	for start > 0 && isAlpha(t[start-1]) {
		start--
	}
	scheme := lowerASCII(t[start:k])
	if !containsStr(urlSchemes, scheme) {
		return extracted{}, false
	}
	end := k + 3
	for end < len(t) && isURLChar(t[end]) {
		end++
	}
	u := t[start:end]
	// Trailing punctuation, and a ")" or "]" the URL did not open, belong
	// to the sentence.
	for len(u) > k-start+3 {
		c := u[len(u)-1]
		if strings.IndexByte(".,;:!?'\"*_", c) >= 0 ||
			(c == ')' && strings.Count(u, "(") < strings.Count(u, ")")) ||
			(c == ']' && strings.Count(u, "[") < strings.Count(u, "]")) {
			u = u[:len(u)-1]
			continue
		}
		break
	}
	rest := u[k-start+3:]
	host := rest
	if s := strings.IndexAny(rest, "/?#"); s >= 0 {
		host = rest[:s]
	}
	if host == "" && scheme != "file" {
		return extracted{}, false
	}
	if scheme == "file" && !strings.HasPrefix(rest, "/") && host == "" {
		return extracted{}, false
	}
	return extracted{kind: KindURL, value: u, key: urlForm(u)}, true
}

func isURLChar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", c) >= 0 || c >= 0x80
}

// urlForm is a URL without scheme, "www.", fragment and trailing "/", in
// lower case.
func urlForm(u string) string {
	if k := strings.Index(u, "://"); k >= 0 {
		u = u[k+3:]
	}
	if k := strings.IndexByte(u, '#'); k >= 0 {
		u = u[:k]
	}
	u = strings.TrimPrefix(lowerASCII(u), "www.")
	return strings.TrimRight(u, "/")
}

// ---- issue

func issue(t, prev1, prev2 string) (extracted, bool) {
	if n, ok := strings.CutPrefix(t, "#"); ok && isDigits(n, 1, 6) {
		return extracted{KindIssue, t, n}, true
	}
	if k := strings.IndexByte(t, '#'); k > 0 && isDigits(t[k+1:], 1, 6) {
		repo := t[:k]
		if s := strings.IndexByte(repo, '/'); s > 0 && s < len(repo)-1 && strings.Count(repo, "/") == 1 && isNameChars(repo) {
			return extracted{KindIssue, t, lowerASCII(repo) + "#" + t[k+1:]}, true
		}
		return extracted{}, false
	}
	if n, ok := cutPrefixFold(t, "gh-"); ok && isDigits(n, 1, 6) {
		return extracted{KindIssue, t, n}, true
	}
	prev1, prev2 = word(prev1), word(prev2)
	if isDigits(t, 1, 6) && (prev1 == "pr" || prev1 == "issue" || prev1 == "ticket" || (prev1 == "request" && prev2 == "pull")) {
		word := map[string]string{"pr": "PR", "issue": "issue", "ticket": "ticket", "request": "pull request"}[prev1]
		return extracted{KindIssue, word + " " + t, t}, true
	}
	return extracted{}, false
}

// word is a preceding token as the grammars compare it: punctuation off,
// lower case. Only a token that a grammar reads is so converted.
func word(tok string) string { return lowerASCII(trimPunct(tok)) }

// ---- error codes

var errnoNames = map[string]bool{
	"ENOENT": true, "EACCES": true, "EPERM": true, "EEXIST": true, "ECONNREFUSED": true, "ECONNRESET": true,
	"ETIMEDOUT": true, "EADDRINUSE": true, "EADDRNOTAVAIL": true, "EPIPE": true, "ENOTDIR": true, "EISDIR": true,
	"EBADF": true, "EAGAIN": true, "ENOSPC": true, "EMFILE": true, "ENOTEMPTY": true, "EINVAL": true,
	"EHOSTUNREACH": true, "ENETUNREACH": true, "EROFS": true, "ENOMEM": true, "EBUSY": true, "EINTR": true,
	"ENOTFOUND": true, "ENOTCONN": true, "ECANCELED": true, "EOF": false,
}

// codePrefixes are the letter prefixes of compiler and linter codes: rustc
// (E), pycodestyle/pylint/flake8 (E, W, F, C), TypeScript (TS), C# and
// Roslyn analyzers (CS, CA, IDE), staticcheck (SA, ST, QF, S), ShellCheck
// (SC), MSVC (C, LNK), MSBuild (MSB), NuGet (NU).
var codePrefixes = map[string]bool{"E": true, "W": true, "F": true, "C": true, "TS": true, "CS": true,
	"CA": true, "IDE": true, "SA": true, "ST": true, "QF": true, "S": true, "SC": true, "LNK": true,
	"MSB": true, "NU": true}

func errorCode(t, prev1, prev2 string) (extracted, bool) {
	if errnoNames[t] {
		return extracted{KindErrorCode, t, t}, true
	}
	if n, ok := strings.CutPrefix(t, "-32"); ok && isDigits(n, 3, 3) {
		return extracted{KindErrorCode, t, t}, true
	}
	if strings.HasPrefix(t, "ERR_") && len(t) >= 8 && isUpperSnake(t) {
		return extracted{KindErrorCode, t, t}, true
	}
	letters := 0
	for letters < len(t) && t[letters] >= 'A' && t[letters] <= 'Z' {
		letters++
	}
	if letters > 0 && codePrefixes[t[:letters]] && isDigits(t[letters:], 3, 5) {
		return extracted{KindErrorCode, t, t}, true
	}
	if isDigits(t, 1, 3) {
		prev1, prev2 = word(prev1), word(prev2)
		if (prev1 == "status" || prev1 == "code") && prev2 == "exit" {
			return extracted{KindErrorCode, "exit status " + t, "exit " + t}, true
		}
		if len(t) == 3 && t[0] >= '1' && t[0] <= '5' &&
			(prev1 == "http" || strings.HasPrefix(prev1, "http/") || prev1 == "status" || (prev1 == "code" && prev2 == "status")) {
			return extracted{KindErrorCode, "HTTP " + t, "http " + t}, true
		}
	}
	return extracted{}, false
}

func isUpperSnake(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ---- hashes

var digestPrefixes = []string{"sha256:", "sha512:", "sha384:", "sha1:", "md5:", "sha256-", "sha512-", "sha1-"}

func hash(t, _, _ string) (extracted, bool) {
	if a, b, ok := strings.Cut(t, ".."); ok {
		// A commit range, a..b or a...b: the first end is read here (one
		// reference a token); a range is rare enough.
		b = strings.TrimPrefix(b, ".")
		if _, ok := hexRun(a); ok {
			if _, ok := hexRun(b); ok {
				t = a
			}
		}
	}
	prefixed := false
	for _, p := range digestPrefixes {
		if rest, ok := cutPrefixFold(t, p); ok {
			t, prefixed = rest, true
			break
		}
	}
	h, ok := hexRun(t)
	if !ok {
		return extracted{}, false
	}
	n := len(h)
	switch {
	case prefixed || n == 32 || n == 64 || n == 96 || n == 128:
		if n < 7 {
			return extracted{}, false
		}
		return extracted{KindChecksum, t, h}, true
	case n >= 7 && n <= 40:
		return extracted{KindCommit, t, h}, true
	}
	return extracted{}, false
}

// hexRun returns t in lower case if it is 7 to 128 hex digits of one letter
// case with at least one digit and one letter.
func hexRun(t string) (string, bool) {
	if len(t) < 7 || len(t) > 128 {
		return "", false
	}
	digit, lower, upper := false, false, false
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'f':
			lower = true
		case c >= 'A' && c <= 'F':
			upper = true
		default:
			return "", false
		}
	}
	if !digit || lower == upper {
		return "", false
	}
	return lowerASCII(t), true
}

// ---- versions

func version(t, prev1, _ string) (extracted, bool) {
	if k := strings.LastIndexByte(t, '@'); k > 0 {
		v := t[k+1:]
		if parts, ok := versionCore(strings.TrimPrefix(v, "v")); ok && parts >= 2 && isNameChars(t[:k]) {
			return extracted{KindVersion, t, lowerASCII(t)}, true
		}
		return extracted{}, false
	}
	if v, ok := strings.CutPrefix(t, "v"); ok || strings.HasPrefix(t, "V") {
		if !ok {
			v = t[1:]
		}
		if parts, ok := versionCore(v); ok && parts >= 2 && parts <= 4 {
			return extracted{KindVersion, t, lowerASCII(v)}, true
		}
		return extracted{}, false
	}
	parts, ok := versionCore(t)
	if !ok {
		return extracted{}, false
	}
	prev1 = word(prev1)
	major, _, _ := strings.Cut(t, ".")
	if parts == 3 && len(major) <= 3 && !numberedPart[prev1] {
		return extracted{KindVersion, t, lowerASCII(t)}, true
	}
	if parts >= 2 && parts <= 3 && (prev1 == "version" || prev1 == "release" || prev1 == "ver" || prev1 == "version:") {
		return extracted{KindVersion, t, lowerASCII(t)}, true
	}
	return extracted{}, false
}

// numberedPart are words before a number that is a part of a document,
// not a version ("section 3.2.1").
var numberedPart = map[string]bool{"section": true, "sections": true, "§": true, "chapter": true,
	"step": true, "figure": true, "fig": true, "table": true, "rule": true, "item": true,
	"paragraph": true, "clause": true, "appendix": true, "part": true, "page": true}

// versionCore reads N(.N)+ with an optional -pre or +build suffix and
// returns the number of numeric parts.
func versionCore(v string) (int, bool) {
	core := v
	if k := strings.IndexAny(v, "-+"); k >= 0 {
		core, v = v[:k], v[k+1:]
		if v == "" || !isNameChars(v) {
			return 0, false
		}
	}
	parts := strings.Split(core, ".")
	if len(parts) < 2 {
		return 0, false
	}
	for _, p := range parts {
		if !isDigits(p, 1, 9) {
			return 0, false
		}
	}
	return len(parts), true
}

// ---- paths

// fileExts are the extensions that make a bare name a file name.
var fileExts = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`go mod sum md txt json jsonl yaml yml toml ini cfg conf env lock
		ts tsx js jsx mjs cjs py rs c h cc cpp hpp java kt swift rb php cs fs scala sh bash zsh ps1
		html htm css scss sql proto xml csv log diff patch mk cmake gradle sln csproj vue svelte zig
		lua pl ex exs erl hs ml dart r jl nix tf lock gz tgz zip tar png jpg jpeg svg pdf wasm`) {
		fileExts[e] = true
	}
}

// productNames look like file names and are not ("Node.js").
var productNames = map[string]bool{"node.js": true, "next.js": true, "vue.js": true, "nuxt.js": true,
	"three.js": true, "chart.js": true, "express.js": true, "ember.js": true, "backbone.js": true,
	"angular.js": true, "react.js": true, "d3.js": true, "p5.js": true, "deno.js": true, "socket.io": true,
	"asp.net": true, "vue.ts": true}

var specialFiles = map[string]bool{"Makefile": true, "Dockerfile": true, "GNUmakefile": true, "Containerfile": true,
	"Justfile": true, "Rakefile": true, "Gemfile": true, "Procfile": true, "Vagrantfile": true}

func textPath(t, _, _ string) (extracted, bool) {
	t = stripLineSuffix(t)
	if t == "" || !isPathChars(t) || strings.Contains(t, "://") {
		return extracted{}, false
	}
	if !validPath(t) {
		return extracted{}, false
	}
	return extracted{KindPath, t, pathKey(t)}, true
}

func validPath(t string) bool {
	dir := strings.HasSuffix(t, "/")
	if strings.Contains(t, "//") {
		return false
	}
	segs := strings.FieldsFunc(t, func(r rune) bool { return r == '/' })
	if len(segs) == 0 {
		return false
	}
	last := segs[len(segs)-1]
	switch {
	case strings.HasPrefix(t, "/"):
		return len(segs) >= 2 && !isDigits(segs[0], 1, 20)
	case strings.HasPrefix(t, "~/"), strings.HasPrefix(t, "./"), strings.HasPrefix(t, "../"):
		return len(segs) >= 2 && strings.Trim(last, ".") != ""
	case strings.Contains(t, "/"):
		if len(segs) < 2 || !(isAlnum(t[0]) || t[0] == '_' || t[0] == '.' || t[0] == '@') {
			return false
		}
		return dir || hasExt(last)
	default:
		if specialFiles[t] {
			return true
		}
		return hasKnownExt(t) && !productNames[lowerASCII(t)]
	}
}

// hasExt: a last segment "name.ext", ext a letter and up to 9 letters or
// digits, name not empty (".github" is a name, not an extension).
func hasExt(seg string) bool {
	k := strings.LastIndexByte(seg, '.')
	if k <= 0 || k == len(seg)-1 {
		return false
	}
	ext := seg[k+1:]
	if len(ext) > 10 || !isAlpha(ext[0]) {
		return false
	}
	for i := 0; i < len(ext); i++ {
		if !isAlnum(ext[i]) {
			return false
		}
	}
	return true
}

func hasKnownExt(name string) bool {
	k := strings.LastIndexByte(name, '.')
	if k <= 0 || k == len(name)-1 {
		return false
	}
	if isDigits(name[:k], 1, 100) {
		return false
	}
	for i := 0; i < k; i++ {
		c := name[i]
		if !(isAlnum(c) || c == '_' || c == '-' || c == '.' || c == '@' || c == '+') {
			return false
		}
	}
	return fileExts[name[k+1:]]
}

// stripLineSuffix takes ":12", ":12:5" and "#L12" off a path.
func stripLineSuffix(t string) string {
	if k := strings.Index(t, "#L"); k > 0 && isDigits(strings.SplitN(t[k+2:], "-", 2)[0], 1, 9) {
		t = t[:k]
	}
	for range 2 {
		k := strings.LastIndexByte(t, ':')
		if k > 0 && isDigits(t[k+1:], 1, 9) {
			t = t[:k]
		}
	}
	return t
}

func isPathChars(t string) bool {
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(isAlnum(c) || strings.IndexByte("._-/~@+", c) >= 0 || c >= 0x80) {
			return false
		}
	}
	return true
}

// pathKey is a path cleaned, for telling two spellings apart.
func pathKey(p string) string {
	dir := strings.HasSuffix(p, "/")
	c := path.Clean(p)
	if dir && c != "/" {
		c += "/"
	}
	return c
}

// structuredPath takes a path a tool call names as is.
func structuredPath(p string) (extracted, bool) {
	p = strings.TrimSpace(p)
	if p == "" || len(p) > 4096 || strings.ContainsAny(p, "\n\r\x00") {
		return extracted{}, false
	}
	return extracted{KindPath, p, pathKey(p)}, true
}

var rawPathKeys = map[string]bool{"path": true, "file_path": true, "filePath": true, "filename": true,
	"file": true, "paths": true, "files": true, "notebook_path": true, "target_file": true,
	"source": true, "destination": true, "abs_path": true, "absPath": true}

var rawTextKeys = map[string]bool{"command": true, "cmd": true}

// extractRawInput reads a tool call's rawInput: path members as paths, the
// command as text. Anything unreadable is skipped.
func extractRawInput(raw json.RawMessage, emit func(extracted)) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > 8 {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch {
				case rawPathKeys[k]:
					pathValues(x, emit)
				case rawTextKeys[k]:
					if s, ok := x.(string); ok {
						extractText(s, emit)
					} else if arr, ok := x.([]any); ok {
						for _, a := range arr {
							if s, ok := a.(string); ok {
								extractText(s, emit)
							}
						}
					}
				default:
					walk(x, depth+1)
				}
			}
		case []any:
			for _, x := range v {
				walk(x, depth+1)
			}
		}
	}
	walk(v, 0)
}

func pathValues(v any, emit func(extracted)) {
	switch v := v.(type) {
	case string:
		if e, ok := structuredPath(v); ok {
			emit(e)
		}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				if e, ok := structuredPath(s); ok {
					emit(e)
				}
			}
		}
	}
}

// ---- identifiers

var keywords = map[string]bool{"true": true, "false": true, "null": true, "nil": true, "none": true,
	"None": true, "True": true, "False": true, "undefined": true, "return": true, "func": true,
	"const": true, "this": true, "self": true, "void": true, "string": true, "bool": true, "error": true,
	"int": true, "uint": true, "byte": true, "rune": true, "float": true, "char": true, "type": true,
	"struct": true, "class": true, "import": true, "export": true, "async": true, "await": true,
	"yield": true, "break": true, "continue": true, "else": true, "case": true, "default": true,
	"switch": true, "while": true, "defer": true, "interface": true, "package": true, "public": true,
	"private": true, "static": true, "final": true, "let": true, "var": true, "new": true, "delete": true}

func identifier(c string) (extracted, bool) {
	if len(c) < 3 || len(c) > 100 {
		return extracted{}, false
	}
	if !(isAlpha(c[0]) || c[0] == '_' || c[0] == '$' || c[0] == '-') {
		return extracted{}, false
	}
	plain := true
	for i := 0; i < len(c); i++ {
		ch := c[i]
		if !(isAlnum(ch) || strings.IndexByte("_.:$-=()[]*&<>/", ch) >= 0) {
			return extracted{}, false
		}
		if !(ch >= 'a' && ch <= 'z') {
			plain = false
		}
	}
	if keywords[c] || (plain && len(c) < 4) {
		return extracted{}, false
	}
	return extracted{KindIdentifier, c, c}, true
}

// ---- normal forms

// forms are the lower-case strings any of which in the summary means the
// reference survives (see "Survival" in the package documentation).
func forms(k Kind, v string) []string {
	l := lowerASCII(v)
	switch k {
	case KindPath:
		c := strings.TrimRight(pathKey(v), "/")
		segs := strings.Split(strings.TrimLeft(c, "/"), "/")
		if len(segs) > 2 {
			segs = segs[len(segs)-2:]
		}
		f := strings.Join(segs, "/")
		// The last two segments as written too: a tool's path may not be
		// clean ("/a/./b.go"), and the summary may quote it as it was.
		w := strings.TrimRight(l, "/")
		if i := strings.LastIndexByte(w, '/'); i > 0 {
			if j := strings.LastIndexByte(w[:i], '/'); j >= 0 {
				w = w[j+1:]
			}
		}
		if f == "" || f == "." || f == ".." {
			return []string{w}
		}
		return []string{lowerASCII(f), w}
	case KindURL:
		u := urlForm(v)
		out := []string{u}
		// An issue or pull request URL survives as its number too.
		for _, seg := range []string{"/issues/", "/pull/", "/merge_requests/"} {
			if k := strings.Index(u, seg); k >= 0 {
				n := u[k+len(seg):]
				if e := strings.IndexAny(n, "/?"); e >= 0 {
					n = n[:e]
				}
				if isDigits(n, 1, 9) {
					out = append(out, "#"+n)
				}
			}
		}
		return out
	case KindCommit, KindChecksum:
		for _, p := range digestPrefixes {
			if rest, ok := strings.CutPrefix(l, p); ok {
				l = rest
				break
			}
		}
		if a, _, ok := strings.Cut(l, ".."); ok {
			l = a
		}
		if len(l) > 7 {
			l = l[:7]
		}
		return []string{l}
	case KindVersion:
		if k := strings.LastIndexByte(l, '@'); k >= 0 {
			l = l[k+1:]
		}
		return []string{strings.TrimPrefix(l, "v")}
	case KindIssue:
		n := l
		if k := strings.LastIndexAny(l, "# -"); k >= 0 {
			n = l[k+1:]
		}
		return []string{"#" + n, "pull/" + n, "issues/" + n, "pr " + n, "pr-" + n, "issue " + n,
			"gh-" + n, "pull request " + n, "merge_requests/" + n, "ticket " + n}
	case KindIdentifier:
		out := []string{strings.TrimLeft(strings.TrimSuffix(l, "()"), "-")}
		base := strings.TrimSuffix(l, "()")
		if k := strings.LastIndexAny(base, ".:/"); k >= 0 && len(base)-k-1 >= 4 {
			out = append(out, base[k+1:])
		}
		return out
	case KindErrorCode:
		if n, ok := strings.CutPrefix(l, "http "); ok {
			return []string{n}
		}
		if n, ok := strings.CutPrefix(l, "exit status "); ok {
			return []string{"status " + n, "code " + n, "exit " + n, "exited with " + n}
		}
		return []string{l}
	}
	return []string{l}
}

// ---- bytes

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' }

func isDigits(s string, min, max int) bool {
	if len(s) < min || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isNameChars: a package or repository name, letters, digits and ._-/@+.
func isNameChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || strings.IndexByte("._-/@+", c) >= 0) {
			return false
		}
	}
	return true
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
