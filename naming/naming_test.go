package naming

import "testing"

func TestTable(t *testing.T) {
	refs := []Ref{
		{"files", "read"},
		{"files", "a__b"},
		{"files-x", "b"},
		{"files", "x__b"},
		{"files", "read"}, // duplicate
	}
	tab := NewTable(refs)
	if tab.Len() != 4 {
		t.Fatalf("Len = %d, want 4", tab.Len())
	}
	tests := []struct {
		exposed string
		want    Ref
	}{
		{"mcp__files__read", Ref{"files", "read"}},
		{"mcp__files__a__b", Ref{"files", "a__b"}},
		{"mcp__files-x__b", Ref{"files-x", "b"}},
		{"mcp__files__x__b", Ref{"files", "x__b"}},
	}
	for _, tt := range tests {
		got, ok := tab.Lookup(tt.exposed)
		if !ok || got != tt.want {
			t.Errorf("Lookup(%q) = %v, %v; want %v", tt.exposed, got, ok, tt.want)
		}
		if e, ok := tab.Exposed(tt.want); !ok || e != tt.exposed {
			t.Errorf("Exposed(%v) = %q, %v; want %q", tt.want, e, ok, tt.exposed)
		}
	}
	if _, ok := tab.Lookup("mcp__files__nope"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
}

func FuzzTable(f *testing.F) {
	f.Add("files", "read", "files-x", "b")
	f.Add("a", "b__c", "a-", "__c")
	f.Fuzz(func(t *testing.T, s1, n1, s2, n2 string) {
		if !validServer(s1) || !validServer(s2) {
			return
		}
		r1, r2 := Ref{s1, n1}, Ref{s2, n2}
		tab := NewTable([]Ref{r1, r2})
		for _, r := range []Ref{r1, r2} {
			e, ok := tab.Exposed(r)
			if !ok {
				t.Fatalf("%v missing", r)
			}
			if got, ok := tab.Lookup(e); !ok || got != r {
				t.Fatalf("round trip of %v via %q gave %v", r, e, got)
			}
		}
		if r1 != r2 && tab.Len() != 2 {
			t.Fatalf("distinct refs %v %v collided", r1, r2)
		}
	})
}

// validServer is the config rule for server names.
func validServer(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
		if i > 0 && s[i-1] == '_' && c == '_' {
			return false
		}
	}
	return true
}
