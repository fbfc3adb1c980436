package config

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v4"
)

func TestDuration_UnmarshalYAML(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    Duration
		wantErr string
	}{
		{name: "seconds", yaml: "90s", want: Duration(90 * time.Second)},
		{name: "compound", yaml: "1h30m", want: Duration(90 * time.Minute)},
		{name: "quoted", yaml: `"250ms"`, want: Duration(250 * time.Millisecond)},
		{name: "zero with unit", yaml: "0s"},
		{name: "negative is for Validate", yaml: "-1s", want: Duration(-time.Second)},
		{name: "bare number", yaml: "90", wantErr: `must be a duration with a unit, like "90s" or "2m" (a bare number has no unit)`},
		{name: "quoted bare number", yaml: `"90"`, wantErr: `"90" is not a duration; write one with a unit, like "90s" or "2m"`},
		{name: "float", yaml: "1.5", wantErr: `must be a duration with a unit, like "90s" or "2m" (a bare number has no unit)`},
		{name: "words", yaml: "ten minutes", wantErr: `"ten minutes" is not a duration; write one with a unit, like "90s" or "2m"`},
		{name: "bool", yaml: "true", wantErr: `must be a duration like "90s" or "2m", not true or false`},
		{name: "list", yaml: "[1s]", wantErr: `must be a duration like "90s" or "2m", not a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Duration
			err := unmarshalNode(t, tt.yaml, &got)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tt.want {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
}

func TestByteSize_UnmarshalYAML(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    ByteSize
		wantErr string
	}{
		{name: "bytes", yaml: "1048576", want: 1 << 20},
		{name: "hex bytes", yaml: "0x100", want: 256},
		{name: "B", yaml: "100B", want: 100},
		{name: "KB", yaml: "2KB", want: 2000},
		{name: "MB", yaml: "3MB", want: 3_000_000},
		{name: "GB", yaml: "1GB", want: 1_000_000_000},
		{name: "KiB", yaml: "512KiB", want: 512 << 10},
		{name: "MiB", yaml: "4MiB", want: 4 << 20},
		{name: "GiB", yaml: "1GiB", want: 1 << 30},
		{name: "space", yaml: "512 KiB", want: 512 << 10},
		{name: "quoted number", yaml: `"64"`, want: 64},
		{name: "negative number is for Validate", yaml: "-1", want: -1},
		{name: "largest", yaml: "8GiB", want: 8 << 30},
		{name: "lower-case unit", yaml: "4mib", wantErr: `"4mib" has an unknown unit "mib"; units are case-sensitive: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)`},
		{name: "bits", yaml: "4Mb", wantErr: `"4Mb" has an unknown unit "Mb"; units are case-sensitive: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)`},
		{name: "TiB is not a unit", yaml: "1TiB", wantErr: `"1TiB" has an unknown unit "TiB"; units are case-sensitive: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024)`},
		{name: "fraction", yaml: "1.5MiB", wantErr: `"1.5MiB" is not a whole number; use a smaller unit, like "1536KiB" for 1.5MiB`},
		{name: "no number", yaml: "MiB", wantErr: `"MiB" is not a size; write a whole number and a unit, like "4MiB" or "512 KiB" (units: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024))`},
		{name: "negative string", yaml: "-4MiB", wantErr: `"-4MiB" is not a size; write a whole number and a unit, like "4MiB" or "512 KiB" (units: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024))`},
		{name: "overflow", yaml: "9999999999GiB", wantErr: `"9999999999GiB" is too large`},
		{name: "overflow number", yaml: "99999999999999999999", wantErr: "must be a whole number of bytes or a size like \"4MiB\", not a number"},
		{name: "float", yaml: "1.5", wantErr: `must be a whole number of bytes or a size like "4MiB", not a number`},
		{name: "list", yaml: "[1]", wantErr: `must be a size like "4MiB" or a number of bytes, not a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got ByteSize
			err := unmarshalNode(t, tt.yaml, &got)
			if diff := cmp.Diff(tt.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tt.want {
				t.Errorf("got %d; want %d", got, tt.want)
			}
		})
	}
}

func TestByteSize_String(t *testing.T) {
	tests := []struct {
		name string
		b    ByteSize
		want string
	}{
		{name: "zero", b: 0, want: "0B"},
		{name: "bytes", b: 1023, want: "1023B"},
		{name: "KiB", b: 1024, want: "1KiB"},
		{name: "MiB", b: 4 << 20, want: "4MiB"},
		{name: "GiB", b: 1 << 30, want: "1GiB"},
		{name: "KB", b: 1500, want: "1500B"},
		{name: "KB exactly", b: 3000, want: "3KB"},
		{name: "MB", b: 5_000_000, want: "5MB"},
		{name: "binary first", b: 1000 << 10, want: "1000KiB"},
		{name: "negative", b: -2048, want: "-2KiB"},
		{name: "largest", b: math.MaxInt64, want: "9223372036854775807B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.String(); got != tt.want {
				t.Errorf("String() = %q; want %q", got, tt.want)
			}
		})
	}
}

// MarshalYAML writes what UnmarshalYAML reads.
func TestMarshalYAML_RoundTrip(t *testing.T) {
	type sizes struct {
		D Duration `yaml:"d"`
		B ByteSize `yaml:"b"`
	}
	for _, want := range []sizes{
		{},
		{D: Duration(90 * time.Second), B: 4 << 20},
		{D: Duration(time.Nanosecond), B: 1},
		{D: Duration(1<<63 - 1), B: 1<<63 - 1},
		{D: Duration(25 * time.Hour), B: 12_000},
	} {
		data, err := yaml.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var got sizes
		if err := yaml.Unmarshal(data, &got); err != nil {
			t.Fatalf("Unmarshal(%q): %v", data, err)
		}
		if got != want {
			t.Errorf("round trip of %+v through %q = %+v", want, data, got)
		}
	}
}

// unmarshalNode calls u's UnmarshalYAML with the value s, as the config's
// decoder does.
func unmarshalNode(t *testing.T, s string, u yaml.Unmarshaler) error {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil || len(doc.Content) != 1 {
		t.Fatalf("parsing %q: %v", s, err)
	}
	return u.UnmarshalYAML(doc.Content[0])
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
