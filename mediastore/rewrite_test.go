package mediastore

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

const owner = "principal:alice"

var (
	b64    = base64.StdEncoding.EncodeToString
	pngBin = []byte("\x89PNG\r\n\x1a\n-an image-")
	wavBin = []byte("RIFF....WAVEfmt ")
	pdfBin = []byte("%PDF-1.7 a document")
)

// mediaURL and linkName are what the rewrite should make of data stored
// by owner as mimeType.
func mediaURL(data []byte, mimeType string) string {
	return "https://gw.example/media/" + wantID(owner, data) + "." + ExtFor(mimeType)
}

func linkName(kind string, data []byte, mimeType string) string {
	return kind + "-" + wantID(owner, data)[:8] + "." + ExtFor(mimeType)
}

// link is the resource_link expected for data; extra is appended inside
// the object (",\"annotations\":…").
func link(kind string, data []byte, mimeType, extra string) string {
	return `{"type":"resource_link","uri":"` + mediaURL(data, mimeType) + `","name":"` + linkName(kind, data, mimeType) +
		`","mimeType":"` + mimeType + `","size":` + strconv.Itoa(len(data)) + extra + `}`
}

func TestRewriteContent(t *testing.T) {
	imageBlock := `{"type":"image","data":"` + b64(pngBin) + `","mimeType":"image/png"}`
	textBlock := `{ "text" : "keep\u00e9 me",  "type":"text" }`
	unpadded := strings.TrimRight(b64(pngBin[:len(pngBin)-1]), "=")
	urlSafe := strings.NewReplacer("+", "-", "/", "_").Replace(b64([]byte{0xfb, 0xff, 0xfe, 0xfb, 0xff, 0xfe}))
	tests := []struct {
		name        string
		in          string
		r           Rewrite // Owner and BaseURL are filled in; MinBytes -1 when zero, unless defaultMin
		defaultMin  bool
		storeMax    int64
		want        string // "" means unchanged
		wantWarning string
	}{
		{
			name: "image",
			in:   `[` + imageBlock + `]`,
			want: `[` + link("image", pngBin, "image/png", "") + `]`,
		},
		{
			name: "audio",
			in:   `[{"type":"audio","mimeType":"audio/wav","data":"` + b64(wavBin) + `"}]`,
			want: `[` + link("audio", wavBin, "audio/wav", "") + `]`,
		},
		{
			name: "embedded blob named by its uri, with a title",
			in:   `[{"type":"resource","resource":{"uri":"file:///tmp/report.pdf","title":"The report","mimeType":"application/pdf","blob":"` + b64(pdfBin) + `"}}]`,
			want: `[{"type":"resource_link","uri":"` + mediaURL(pdfBin, "application/pdf") + `","name":"report.pdf","title":"The report","mimeType":"application/pdf","size":` + strconv.Itoa(len(pdfBin)) + `}]`,
		},
		{
			name: "embedded blob with an unsafe last segment",
			in:   `[{"type":"resource","resource":{"uri":"file:///tmp/r%C3%A9sum%C3%A9.pdf","mimeType":"application/pdf","blob":"` + b64(pdfBin) + `"}}]`,
			want: `[` + link("resource", pdfBin, "application/pdf", "") + `]`,
		},
		{
			name: "embedded blob whose uri ends in a slash",
			in:   `[{"type":"resource","resource":{"uri":"blob://x/","mimeType":"application/pdf","blob":"` + b64(pdfBin) + `"}}]`,
			want: `[` + link("resource", pdfBin, "application/pdf", "") + `]`,
		},
		{
			name: "embedded blob named ..",
			in:   `[{"type":"resource","resource":{"uri":"file:///tmp/..","mimeType":"application/pdf","blob":"` + b64(pdfBin) + `"}}]`,
			want: `[` + link("resource", pdfBin, "application/pdf", "") + `]`,
		},
		{
			name: "embedded text resource",
			in:   `[{"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"hello"}}]`,
		},
		{
			name: "text, resource_link and unknown types pass byte for byte",
			in:   "[ " + textBlock + ",\n" + imageBlock + `, {"type":"resource_link","uri":"https://x/y.png","name":"y"} , {"type":"video","data":"` + b64(pngBin) + `"} ]`,
			want: `[` + textBlock + `,` + link("image", pngBin, "image/png", "") + `,{"type":"resource_link","uri":"https://x/y.png","name":"y"},{"type":"video","data":"` + b64(pngBin) + `"}]`,
		},
		{
			name: "annotations and _meta kept verbatim",
			in:   `[{"type":"image","annotations":{ "audience" : ["user"], "priority":0.50 },"data":"` + b64(pngBin) + `","mimeType":"image/png","_meta":{"k":[1, 2]}}]`,
			want: `[` + link("image", pngBin, "image/png", `,"annotations":{ "audience" : ["user"], "priority":0.50 },"_meta":{"k":[1, 2]}`) + `]`,
		},
		{
			name: "embedded resource keeps the block's annotations",
			in:   `[{"type":"resource","resource":{"uri":"file:///a.png","mimeType":"image/png","blob":"` + b64(pngBin) + `","_meta":{"inner":1}},"annotations":{"audience":["assistant"]}}]`,
			want: `[{"type":"resource_link","uri":"` + mediaURL(pngBin, "image/png") + `","name":"a.png","mimeType":"image/png","size":` + strconv.Itoa(len(pngBin)) + `,"annotations":{"audience":["assistant"]}}]`,
		},
		{
			name: "missing mimeType",
			in:   `[{"type":"image","data":"` + b64(pngBin) + `"}]`,
			want: `[` + link("image", pngBin, "application/octet-stream", "") + `]`,
		},
		{
			name: "null mimeType",
			in:   `[{"type":"image","data":"` + b64(pngBin) + `","mimeType":null}]`,
			want: `[` + link("image", pngBin, "application/octet-stream", "") + `]`,
		},
		{
			name: "mimeType not a string",
			in:   `[{"type":"image","data":"` + b64(pngBin) + `","mimeType":7}]`,
		},
		{
			name: "data not a string",
			in:   `[{"type":"image","data":12345678,"mimeType":"image/png"}]`,
		},
		{
			name: "no data",
			in:   `[{"type":"image","mimeType":"image/png"}]`,
		},
		{
			name:        "bad base64",
			in:          `[{"type":"image","data":"not base64!","mimeType":"image/png"}]`,
			wantWarning: "base64 does not decode",
		},
		{
			name:        "url-safe base64 does not decode",
			in:          `[{"type":"image","data":"` + urlSafe + `","mimeType":"image/png"}]`,
			wantWarning: "base64 does not decode",
		},
		{
			name: "unpadded base64",
			in:   `[{"type":"image","data":"` + unpadded + `","mimeType":"image/png"}]`,
			want: `[` + link("image", pngBin[:len(pngBin)-1], "image/png", "") + `]`,
		},
		{
			name: "escaped base64",
			in:   `[{"type":"image","data":"` + strings.ReplaceAll(b64([]byte{0xff, 0xff, 0xff, 0xfe}), "/", `\/`) + `","mimeType":"image/png"}]`,
			want: `[` + link("image", []byte{0xff, 0xff, 0xff, 0xfe}, "image/png", "") + `]`,
		},
		{
			name:       "default threshold keeps small blobs",
			in:         `[` + imageBlock + `]`,
			defaultMin: true,
		},
		{
			name: "at the threshold stays",
			in:   `[` + imageBlock + `]`,
			r:    Rewrite{MinBytes: len(pngBin)},
		},
		{
			name: "above the threshold goes",
			in:   `[` + imageBlock + `]`,
			r:    Rewrite{MinBytes: len(pngBin) - 1},
			want: `[` + link("image", pngBin, "image/png", "") + `]`,
		},
		{
			name:       "default threshold, a large blob",
			in:         `[{"type":"image","data":"` + b64(bytes.Repeat([]byte{1}, DefaultMinBytes+1)) + `","mimeType":"image/png"}]`,
			defaultMin: true,
			want:       `[` + link("image", bytes.Repeat([]byte{1}, DefaultMinBytes+1), "image/png", "") + `]`,
		},
		{
			name: "inline mode",
			in:   `[` + imageBlock + `]`,
			r:    Rewrite{Mode: ModeInline, MinBytes: -1},
		},
		{
			name: "link+markdown",
			in:   `[` + imageBlock + `,{"type":"audio","mimeType":"audio/wav","data":"` + b64(wavBin) + `"}]`,
			r:    Rewrite{Mode: ModeLinkMarkdown, MinBytes: -1},
			want: `[` + link("image", pngBin, "image/png", "") +
				`,{"type":"text","text":"![` + linkName("image", pngBin, "image/png") + `](` + mediaURL(pngBin, "image/png") + `)"}` +
				`,` + link("audio", wavBin, "audio/wav", "") +
				`,{"type":"text","text":"[` + linkName("audio", wavBin, "audio/wav") + `](` + mediaURL(wavBin, "audio/wav") + `)"}]`,
		},
		{
			name:        "too large for the store",
			in:          `[` + imageBlock + `]`,
			storeMax:    4,
			wantWarning: "storing it failed",
		},
		{
			name: "not an array",
			in:   imageBlock,
		},
		{
			name: "empty array",
			in:   ` [ ] `,
		},
		{
			name: "not JSON",
			in:   `[{"type":"image",`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := newTestStore(t, Options{MaxBytes: tt.storeMax, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			logs.Reset() // New's summary
			r := tt.r
			if r.MinBytes == 0 && !tt.defaultMin {
				r.MinBytes = -1
			}
			r.Owner, r.BaseURL = owner, "https://gw.example/"
			in := json.RawMessage(tt.in)
			got, changed := s.RewriteContent(in, r)
			want := tt.want
			if want == "" {
				want = tt.in
			}
			if string(got) != want {
				t.Errorf("RewriteContent =\n%s\nwant\n%s", got, want)
			}
			if changed != (tt.want != "") {
				t.Errorf("changed = %v", changed)
			}
			if changed && !json.Valid(got) {
				t.Errorf("output is not JSON: %s", got)
			}
			if !changed && len(got) > 0 && &got[0] != &in[0] {
				t.Errorf("unchanged output is a copy, not the input")
			}
			if tt.wantWarning != "" && (!strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), tt.wantWarning)) {
				t.Errorf("logs %q; want a warning with %q", logs.String(), tt.wantWarning)
			}
			if tt.wantWarning == "" && logs.Len() > 0 {
				t.Errorf("unexpected logs: %s", logs.String())
			}
			if changed {
				// What the links point at is there, for its owner.
				var blocks []struct{ Type, URI string }
				json.Unmarshal(got, &blocks)
				for _, b := range blocks {
					if b.Type != "resource_link" || !strings.HasPrefix(b.URI, "https://gw.example/media/") {
						continue
					}
					if _, _, err := s.ReadFor(owner, strings.TrimPrefix(b.URI, "https://gw.example/media/")); err != nil {
						t.Errorf("ReadFor(%s): %v", b.URI, err)
					}
				}
			}
		})
	}
}

func TestRewriteContent_Signed(t *testing.T) {
	c := newClock()
	s := newTestStore(t, Options{Now: c.Now})
	in := `[{"type":"image","data":"` + b64(pngBin) + `","mimeType":"image/png"}]`
	got, changed := s.RewriteContent(json.RawMessage(in), Rewrite{Owner: owner, BaseURL: "https://gw.example", MinBytes: -1, SignTTL: time.Hour, Mode: ModeLinkMarkdown})
	if !changed {
		t.Fatal("not rewritten")
	}
	var blocks []struct{ URI, Text string }
	if err := json.Unmarshal(got, &blocks); err != nil || len(blocks) != 2 {
		t.Fatalf("output %s: %v", got, err)
	}
	e, _ := s.Get(wantID(owner, pngBin) + ".png")
	want := s.URL("https://gw.example", e, time.Hour)
	if blocks[0].URI != want || !strings.Contains(blocks[1].Text, "]("+want+")") {
		t.Errorf("output %s; want the signed URL %s", got, want)
	}
	if !bytes.Contains(got, []byte("&sig=")) {
		t.Errorf("output %s escapes the URL's &", got)
	}
}

func TestRewriteBlock(t *testing.T) {
	tests := []struct {
		name string
		in   string
		mode Mode
		want string // "" means unchanged
	}{
		{"image", `{"type":"image","data":"` + b64(pngBin) + `","mimeType":"image/png"}`, "", link("image", pngBin, "image/png", "")},
		{"markdown mode gives one block", `{"type":"image","data":"` + b64(pngBin) + `","mimeType":"image/png"}`, ModeLinkMarkdown, link("image", pngBin, "image/png", "")},
		{"unknown mode is link", `{"type":"audio","data":"` + b64(wavBin) + `","mimeType":"audio/wav"}`, "links", link("audio", wavBin, "audio/wav", "")},
		{"inline", `{"type":"image","data":"` + b64(pngBin) + `","mimeType":"image/png"}`, ModeInline, ""},
		{"text", `{"type":"text","text":"hi"}`, "", ""},
		{"embedded text", `{"type":"resource","resource":{"uri":"x:y","text":"hi"}}`, "", ""},
		{"array", `[{"type":"image","data":"` + b64(pngBin) + `","mimeType":"image/png"}]`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t, Options{})
			got, changed := s.RewriteBlock(json.RawMessage(tt.in), Rewrite{Owner: owner, BaseURL: "https://gw.example", Mode: tt.mode, MinBytes: -1})
			want := tt.want
			if want == "" {
				want = tt.in
			}
			if string(got) != want || changed != (tt.want != "") {
				t.Errorf("RewriteBlock = %s, %v\nwant %s", got, changed, want)
			}
		})
	}
}

func TestRewriteResourceContents(t *testing.T) {
	meta := func(data []byte, mimeType, rest string) string {
		return `"_meta":{"mcpgw/media":{"mimeType":"` + mimeType + `","size":` + strconv.Itoa(len(data)) + `}` + rest + `}`
	}
	tests := []struct {
		name     string
		in       string
		minBytes int
		want     string // "" means unchanged
	}{
		{
			name: "blob",
			in:   `[{"uri":"file:///r.pdf","mimeType":"application/pdf","blob":"` + b64(pdfBin) + `"}]`,
			want: `[{"uri":"file:///r.pdf","mimeType":"text/uri-list","text":"` + mediaURL(pdfBin, "application/pdf") + `",` + meta(pdfBin, "application/pdf", "") + `}]`,
		},
		{
			name: "text content and a blob with its own members and _meta",
			in: `[{"uri":"file:///a.txt","text":"hi"},` +
				`{"blob":"` + b64(pngBin) + `","uri":"file:///a.png","annotations":{"priority":1},"_meta":{"x": 1,"mcpgw/media":"spoofed"},"mimeType":"image/png"}]`,
			want: `[{"uri":"file:///a.txt","text":"hi"},` +
				`{"uri":"file:///a.png","mimeType":"text/uri-list","text":"` + mediaURL(pngBin, "image/png") + `","annotations":{"priority":1},` + meta(pngBin, "image/png", `,"x":1`) + `}]`,
		},
		{
			name: "no mimeType",
			in:   `[{"uri":"file:///x","blob":"` + b64(pngBin) + `"}]`,
			want: `[{"uri":"file:///x","mimeType":"text/uri-list","text":"` + mediaURL(pngBin, "") + `",` + meta(pngBin, "application/octet-stream", "") + `}]`,
		},
		{
			name:     "below the threshold",
			in:       `[{"uri":"file:///r.pdf","mimeType":"application/pdf","blob":"` + b64(pdfBin) + `"}]`,
			minBytes: 1000,
		},
		{
			name: "no uri",
			in:   `[{"mimeType":"application/pdf","blob":"` + b64(pdfBin) + `"}]`,
		},
		{
			name: "bad base64",
			in:   `[{"uri":"file:///r.pdf","mimeType":"application/pdf","blob":"%%%%"}]`,
		},
		{
			name: "only text",
			in:   `[{"uri":"file:///a.txt","text":"hi"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t, Options{})
			minBytes := tt.minBytes
			if minBytes == 0 {
				minBytes = -1
			}
			got, changed := s.RewriteResourceContents(json.RawMessage(tt.in), Rewrite{Owner: owner, BaseURL: "https://gw.example", MinBytes: minBytes})
			want := tt.want
			if want == "" {
				want = tt.in
			}
			if string(got) != want || changed != (tt.want != "") {
				t.Errorf("RewriteResourceContents = %s, %v\nwant %s", got, changed, want)
			}
			if changed && !json.Valid(got) {
				t.Errorf("output is not JSON")
			}
		})
	}
}
