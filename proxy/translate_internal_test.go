package proxy

import (
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"
)

// Each translator is one table entry that recognises something, with a
// bit of its own; one with text forms declares their prefixes.
func TestTranslatorTableEntriesAreWhole(t *testing.T) {
	if len(translatorTable) > 32 {
		t.Fatalf("%d translators do not fit a trSet", len(translatorTable))
	}
	seen := map[Translator]bool{}
	for i, d := range translatorTable {
		if seen[d.name] {
			t.Errorf("%s has two entries", d.name)
		}
		seen[d.name] = true
		if d.bit != 1<<i || trBit(d.name) != d.bit {
			t.Errorf("%s: bit %b, want %b", d.name, d.bit, 1<<i)
		}
		if d.update == nil && d.text == nil {
			t.Errorf("%s recognises nothing", d.name)
		}
		if (d.update != nil) != (len(d.kinds) > 0) {
			t.Errorf("%s: an update recogniser needs the kinds it reads, and kinds a recogniser", d.name)
		}
		if (d.text != nil) != (len(d.prefixes) > 0) {
			t.Errorf("%s: a text recogniser needs its prefixes, and prefixes a recogniser", d.name)
		}
	}
}

// The cheap check that turns message chunks away undecoded is derived from
// the table: every declared prefix passes it, however its first character
// is spelt in JSON, so a translator's text form is never turned away by a
// check that does not know it.
func TestTextPrecheckPassesEveryDeclaredPrefix(t *testing.T) {
	for _, d := range translatorTable {
		tl := newTranslation(nil, d.bit)
		for _, p := range d.prefixes {
			plain, _ := json.Marshal(p)
			r, size := utf8.DecodeRuneInString(p)
			escaped := fmt.Sprintf(`"\u%04x%s"`, r, p[size:])
			for _, spelt := range []string{string(plain), escaped} {
				if !tl.first[spelt[1]] {
					t.Errorf("%s: a text beginning %q, spelt %s, is turned away", d.name, p, spelt)
				}
			}
		}
		if d.text == nil && tl.first != ([256]bool{}) {
			t.Errorf("%s has no text form, but the check lets texts through for it", d.name)
		}
	}
}
