package mediastore

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
)

// oneMiBImage is a tools/call result's content with one 1 MiB PNG-typed
// image block of random bytes.
func oneMiBImage(b *testing.B) json.RawMessage {
	b.Helper()
	data := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(data)
	return json.RawMessage(`[{"type":"text","text":"here it is"},{"type":"image","data":"` + b64(data) + `","mimeType":"image/png"}]`)
}

// BenchmarkRewriteContent1MiBImage_Reused rewrites the same content by
// the same owner again and again: after the first write every iteration
// finds the blob stored, so this measures scanning, base64 decoding,
// hashing and building the link.
func BenchmarkRewriteContent1MiBImage_Reused(b *testing.B) {
	s := newTestStore(b, Options{})
	content := oneMiBImage(b)
	r := Rewrite{Owner: "principal:alice", BaseURL: "https://gw.example"}
	if _, changed := s.RewriteContent(content, r); !changed {
		b.Fatal("not rewritten")
	}
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := s.RewriteContent(content, r); !changed {
			b.Fatal("not rewritten")
		}
	}
	if st := s.Stats(); st.Stored != 1 {
		b.Fatalf("stored %d blobs, want 1", st.Stored)
	}
}

// BenchmarkRewriteContent1MiBImage_Written rewrites the same content for
// a new owner every iteration, so every iteration also writes a new 1 MiB
// file (and, past 64 MiB, evicts an old one).
func BenchmarkRewriteContent1MiBImage_Written(b *testing.B) {
	s := newTestStore(b, Options{MaxBytes: 64 << 20})
	content := oneMiBImage(b)
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		r := Rewrite{Owner: "session:" + strconv.Itoa(i), BaseURL: "https://gw.example"}
		if _, changed := s.RewriteContent(content, r); !changed {
			b.Fatal("not rewritten")
		}
	}
	if st := s.Stats(); st.Stored < uint64(i) {
		b.Fatalf("stored %d blobs in %d iterations", st.Stored, i)
	}
}
