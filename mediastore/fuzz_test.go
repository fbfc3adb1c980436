package mediastore

import (
	"bytes"
	"encoding/json"
	"testing"
)

// isMedia reports whether a block is one the rewrite may replace, decided
// with encoding/json rather than the package's scanner.
func isMedia(block json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(block, &m) != nil {
		return false
	}
	var typ string
	if json.Unmarshal(m["type"], &typ) != nil {
		return false
	}
	switch typ {
	case "image", "audio":
		_, ok := m["data"]
		return ok
	case "resource":
		var res map[string]json.RawMessage
		if json.Unmarshal(m["resource"], &res) != nil {
			return false
		}
		_, ok := res["blob"]
		return ok
	}
	return false
}

func FuzzRewriteContent(f *testing.F) {
	seeds := []string{
		`[{"type":"image","data":"` + b64(pngBin) + `","mimeType":"image/png","annotations":{"a":1},"_meta":{}}]`,
		`[{"type":"text","text":"a\"b\\"},{"type":"audio","data":"` + b64(wavBin) + `"}]`,
		`[{"type":"resource","resource":{"uri":"file:///a/b.pdf","title":"t","mimeType":"application/pdf","blob":"` + b64(pdfBin) + `"}}]`,
		`[{"type":"resource","resource":{"uri":"file:///a.txt","text":"x"}},{"type":"resource_link","uri":"x","name":"y"}]`,
		`[{"type":"image","data":"bad!","mimeType":"image/png"}, 1, "s", null, [], {}]`,
		`[{"type":"im\u0061ge","d\u0061ta":"QUJD","mimeType":"image/\u0070ng"}]`,
		`[{"type":"image","data":"QUJD","data":"REVG"}]`,
		`{"type":"image","data":"QUJD"}`,
		`[`, `]`, ``, `[{"type":"image","data":"QUJ`,
	}
	for i, s := range seeds {
		f.Add([]byte(s), int8(-1), uint8(i%3))
	}
	s := newTestStore(f, Options{MaxBytes: 1 << 20})
	modes := []Mode{ModeLink, ModeLinkMarkdown, ModeInline}
	f.Fuzz(func(t *testing.T, in []byte, minBytes int8, mode uint8) {
		orig := bytes.Clone(in)
		r := Rewrite{Owner: "o", BaseURL: "https://gw.example", MinBytes: int(minBytes), Mode: modes[int(mode)%len(modes)]}
		out, changed := s.RewriteContent(in, r)
		if !bytes.Equal(in, orig) {
			t.Fatal("RewriteContent changed its input")
		}
		if !changed {
			if !bytes.Equal(out, in) {
				t.Fatalf("unchanged, but the output differs:\n%s\n%s", in, out)
			}
			return
		}
		if !json.Valid(in) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("valid input, invalid output:\n%s\n%s", in, out)
		}
		var ins, outs []json.RawMessage
		if err := json.Unmarshal(in, &ins); err != nil {
			t.Fatalf("changed %s, which is not an array", in)
		}
		if err := json.Unmarshal(out, &outs); err != nil {
			t.Fatalf("output is not an array: %s", out)
		}
		// Every block that is not media is in the output, in order.
		j := 0
		for _, b := range ins {
			if isMedia(b) {
				continue
			}
			for j < len(outs) && !bytes.Equal(outs[j], b) {
				j++
			}
			if j == len(outs) {
				t.Fatalf("lost block %s:\nin  %s\nout %s", b, in, out)
			}
			j++
		}
	})
}
