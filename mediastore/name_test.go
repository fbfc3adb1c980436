package mediastore

import (
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	id := strings.Repeat("a2", 26)
	tests := []struct {
		name    string
		in      string
		wantID  string
		wantExt string
		wantErr string // part of the error; "" for none
	}{
		{"png", id + ".png", id, "png", ""},
		{"digits in ext", id + ".mp3", id, "mp3", ""},
		{"ext of 10", id + ".abcdefghij", id, "abcdefghij", ""},
		{"all of the alphabet", "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst.bin", "abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst", "bin", ""},
		{"empty", "", "", "", "empty"},
		{"no ext", id, "", "", "no extension"},
		{"empty ext", id + ".", "", "", "empty extension"},
		{"ext of 11", id + ".abcdefghijk", "", "", "longer than"},
		{"long", id + strings.Repeat("a", 100) + ".png", "", "", "longer than"},
		{"short id", id[:51] + ".png", "", "", "51 characters"},
		{"long id", id + "a.png", "", "", "53 characters"},
		{"upper case id", strings.ToUpper(id) + ".png", "", "", `'A'`},
		{"upper case ext", id + ".PNG", "", "", `'P'`},
		{"digit 1 in id", "1" + id[1:] + ".png", "", "", `'1'`},
		{"slash", "a/" + id[2:] + ".png", "", "", `'/'`},
		{"dot dot", "../" + id[3:] + ".png", "", "", "0 characters"},
		{"two dots", id + ".tar.gz", "", "", `'.'`},
		{"percent", id[:50] + "%2f.png", "", "", `'%'`},
		{"NUL", id + ".pn\x00", "", "", `'\x00'`},
		{"query", id + ".png?x", "", "", `'?'`},
		{"dot first", ".png", "", "", "0 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotID, gotExt, err := ParseName(tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseName(%q): %v", tt.in, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseName(%q): %v, want an error with %s", tt.in, err, tt.wantErr)
			}
			if gotID != tt.wantID || gotExt != tt.wantExt {
				t.Errorf("ParseName(%q) = %q, %q; want %q, %q", tt.in, gotID, gotExt, tt.wantID, tt.wantExt)
			}
		})
	}
}

func FuzzParseName(f *testing.F) {
	id := strings.Repeat("a2", 26)
	for _, s := range []string{id + ".png", id + ".PNG", "", ".", "..", "../" + id, id + "/x.png", id + ".p%6eg", id + ".png\x00", id + "..png"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		id, ext, err := ParseName(name)
		if err != nil {
			if id != "" || ext != "" {
				t.Errorf("ParseName(%q) failed but returned %q, %q", name, id, ext)
			}
			return
		}
		if id+"."+ext != name {
			t.Errorf("ParseName(%q) = %q, %q: does not round-trip", name, id, ext)
		}
		if len(id) != 52 || len(ext) < 1 || len(ext) > 10 {
			t.Errorf("ParseName(%q) = %q, %q: bad lengths", name, id, ext)
		}
		if strings.Trim(id, "abcdefghijklmnopqrstuvwxyz234567") != "" || strings.Trim(ext, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			t.Errorf("ParseName(%q) = %q, %q: characters outside the alphabet", name, id, ext)
		}
	})
}

func TestExtFor(t *testing.T) {
	tests := []struct{ mimeType, want string }{
		{"image/png", "png"},
		{"image/jpeg", "jpg"},
		{"image/gif", "gif"},
		{"image/webp", "webp"},
		{"image/avif", "avif"},
		{"image/bmp", "bmp"},
		{"image/svg+xml", "svg"},
		{"image/x-icon", "ico"},
		{"audio/wav", "wav"},
		{"audio/x-wav", "wav"},
		{"audio/wave", "wav"},
		{"audio/vnd.wave", "wav"},
		{"audio/mpeg", "mp3"},
		{"audio/ogg", "ogg"},
		{"audio/flac", "flac"},
		{"audio/aac", "aac"},
		{"audio/mp4", "m4a"},
		{"audio/webm", "weba"},
		{"video/mp4", "mp4"},
		{"video/webm", "webm"},
		{"application/pdf", "pdf"},
		{"application/json", "json"},
		{"application/zip", "zip"},
		{"text/plain", "txt"},
		{"text/html", "html"},
		{"text/csv", "csv"},
		{"text/markdown", "md"},
		{"application/xml", "xml"},
		{"text/xml", "xml"},
		{"application/javascript", "js"},
		{"text/javascript", "js"},
		{"IMAGE/PNG", "png"},
		{"text/plain; charset=utf-8", "txt"},
		{" text/html ;charset=\"x\"", "html"},
		{"image/tiff", "bin"},
		{"application/octet-stream", "bin"},
		{"", "bin"},
		{"png", "bin"},
	}
	for _, tt := range tests {
		if got := ExtFor(tt.mimeType); got != tt.want {
			t.Errorf("ExtFor(%q) = %q, want %q", tt.mimeType, got, tt.want)
		}
	}
}
