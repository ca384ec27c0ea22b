package audit

import (
	"iter"
	"strings"
)

// ContinuationPrefixes open the messages with which agents hand a summary
// back to the model as a user message (Claude Code, Kimi Code): such a
// message is a summary, not a request.
var ContinuationPrefixes = []string{
	"This session is being continued from a previous conversation",
	"The conversation so far has been compacted",
}

func isContinuation(text string) bool {
	for _, p := range ContinuationPrefixes {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return strings.HasPrefix(text, "<system-reminder>")
}

// IsContinuation reports whether a user message's text is a continuation
// message (it begins with one of ContinuationPrefixes).
func IsContinuation(text string) bool {
	text = strings.TrimSpace(text)
	for _, p := range ContinuationPrefixes {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// isCommand: a slash command ("/compact", "/compress now") is no request
// for the summary to carry.
func isCommand(text string) bool {
	if !strings.HasPrefix(text, "/") || len(text) < 2 || !isAlpha(text[1]) {
		return false
	}
	first, _, _ := strings.Cut(text, " ")
	return !strings.Contains(first[1:], "/")
}

// sentences yields a text's sentences: split at line breaks and at ". ",
// "! ", "? ", with list markers and surrounding space taken off.
func sentences(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		start := 0
		emit := func(end int) bool {
			s := strings.TrimSpace(text[start:end])
			s = strings.TrimLeft(s, "-*+> ")
			if k := strings.Index(s, ". "); k > 0 && k <= 3 && isDigits(s[:k], 1, 3) {
				s = s[k+2:]
			}
			s = strings.TrimSpace(s)
			if s == "" {
				return true
			}
			return yield(s)
		}
		for i := 0; i < len(text); i++ {
			c := text[i]
			switch {
			case c == '\n':
				if !emit(i) {
					return
				}
				start = i + 1
			case (c == '.' || c == '!' || c == '?') && i+1 < len(text) && (text[i+1] == ' ' || text[i+1] == '\n'):
				// "e.g. " and "i.e. " do not end a sentence.
				if c == '.' && i >= 3 && (strings.EqualFold(text[i-3:i], "e.g") || strings.EqualFold(text[i-3:i], "i.e")) {
					continue
				}
				if !emit(i + 1) {
					return
				}
				start = i + 1
			}
		}
		emit(len(text))
	}
}

func firstSentence(text string) string {
	for s := range sentences(text) {
		return s
	}
	return text
}

// hasPrefixFold reports whether s begins with any of the prefixes, ignoring
// case.
func hasPrefixFold(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return true
		}
	}
	return false
}

func normQuotes(s string) string { return strings.ReplaceAll(s, "’", "'") }

func isUserCorrection(s string) bool {
	s = normQuotes(s)
	if !hasPrefixFold(s, "actually", "correction", "no,", "no -", "no —", "i meant", "sorry, i meant",
		"to clarify", "scratch that", "wait,") {
		return false
	}
	l := " " + lowerASCII(s) + " "
	for _, w := range []string{" not ", "n't ", " instead", " rather than", " meant ", " wrong", " should be "} {
		if strings.Contains(l, w) {
			return true
		}
	}
	has := false
	extractText(s, func(extracted) { has = true })
	return has || len(numbers(s)) > 0
}

func isAgentCorrection(s string) bool {
	return hasPrefixFold(normQuotes(s), "correction", "i was wrong", "my mistake", "i misspoke", "i stand corrected")
}

var promiseOpeners = []string{"i'll ", "i will ", "i'm going to ", "i am going to ", "i shall ", "we'll ", "we will "}

var notPromiseVerbs = map[string]bool{"be": true, "wait": true, "need": true, "let": true, "keep": true,
	"stop": true, "leave": true, "have": true}

var deferrals = []string{" later", "follow up", "follow-up", "next time", "next turn", "next session",
	"once you", "when you", "after you", "tomorrow", "separately", "get back to", "circle back", "come back to"}

// promiseSentence reports whether s is a first-person future sentence
// (future) and whether it names a deferral.
func promiseSentence(s string) (future, deferred bool) {
	l := lowerASCII(normQuotes(s))
	for _, w := range []string{"next, ", "next ", "then, ", "then ", "later, ", "later ", "also, ", "also ",
		"afterwards, ", "afterwards "} {
		if strings.HasPrefix(l, w) {
			l = l[len(w):]
			break
		}
	}
	for _, o := range promiseOpeners {
		if rest, ok := strings.CutPrefix(l, o); ok {
			verb, _, _ := strings.Cut(rest, " ")
			verb = strings.TrimRight(verb, ".,;:!?")
			if verb == "" || notPromiseVerbs[verb] {
				return false, false
			}
			future = true
			break
		}
	}
	if !future {
		return false, false
	}
	l = " " + l
	for _, d := range deferrals {
		if strings.Contains(l, d) {
			return true, true
		}
	}
	return true, false
}

// anchorsOf: the normal forms of an open item's references and numbers or,
// without any, its stemmed content words.
func anchorsOf(s string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	extractText(s, func(e extracted) {
		for _, f := range forms(e.kind, e.value) {
			add(f)
		}
	})
	for _, n := range numbers(s) {
		add(n)
	}
	if len(out) > 0 {
		return out
	}
	for w := range words(s) {
		if len(w) >= 5 && !commonWords[w] {
			add(stem(w))
		}
	}
	return out
}

// numbers are the runs of two or more digits in s.
func numbers(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j-i >= 2 && (i == 0 || !isAlpha(s[i-1])) && (j == len(s) || !isAlpha(s[j])) {
			out = append(out, s[i:j])
		}
		i = j
	}
	return out
}

// words yields the lower-case ASCII letter runs of s.
func words(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := 0; i < len(s); {
			if !isAlpha(s[i]) {
				i++
				continue
			}
			j := i
			for j < len(s) && isAlpha(s[j]) {
				j++
			}
			if !yield(lowerASCII(s[i:j])) {
				return
			}
			i = j
		}
	}
}

// wordSet holds every stem of s's words and every prefix a stem of a longer
// word could be, for the "reported done" test of promises.
func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for w := range words(s) {
		if len(w) >= 5 {
			m[stem(w)] = true
			m[w] = true
		}
	}
	return m
}

// stem takes a common English inflection off a word, so "updated",
// "updates" and "updating" share "updat".
func stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "e", "s"} {
		if strings.HasSuffix(w, suf) && len(w)-len(suf) >= 4 {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

// commonWords are words of five or more letters too common to anchor
// anything.
var commonWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`about above after again against along already also although always
		among another answer anyone anything around asked because before being below between both
		bring build built called cannot change check clear close could doing done during each either
		else enough every everything example first found further getting given going great happen
		having hello help however instead issue issues later least maybe might minute moment money
		never next nothing other others otherwise place please point pretty probably quick quite
		rather ready really right since small something sorry start still sure thank thanks their
		there these thing things think those though three through today together under until using
		usual usually very wanted wants where whether which while whole would write wrong years
		yesterday could should shall might actually correction clarify meant scratch instead
		going let's would've please, thanks. let make makes made sure following follow doing look
		looks looking take takes taking want again also work works working use used uses need
		needs needed file files line lines code test tests function change changes changed`) {
		if len(w) >= 5 {
			commonWords[w] = true
		}
	}
}
