package front

import (
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

func TestPlainID(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`17`, `17`},
		{`-1.5e3`, `-1.5e3`},
		{`"abc-1"`, `abc-1`},
		{`""`, ``},
		{`"a\"b"`, `a"b`},
		{`"caf\u00e9"`, `café`},
	} {
		m, err := jsonrpc.ParseOne([]byte(`{"jsonrpc":"2.0","id":` + tt.raw + `,"method":"ping"}`))
		if err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		if got := PlainID(m.ID); got != tt.want {
			t.Errorf("PlainID(%s) = %q, want %q", tt.raw, got, tt.want)
		}
	}
	id := jsonrpc.StringID("req-42")
	if n := testing.AllocsPerRun(100, func() { PlainID(id) }); n != 0 {
		t.Errorf("plainID of a plain string id allocates %v times", n)
	}
}
