package config

import "testing"

func TestServer_PrefixMode(t *testing.T) {
	tests := []struct {
		name   string
		server string // the server's own prefix_mode
		global string // the gateway's naming.prefix_mode
		want   string
	}{
		{name: "inherits the gateway's", global: PrefixOnCollision, want: PrefixOnCollision},
		{name: "overrides the gateway's", server: PrefixNever, global: PrefixAlways, want: PrefixNever},
		{name: "same as the gateway's", server: PrefixAlways, global: PrefixAlways, want: PrefixAlways},
		{name: "zero Naming means the default", want: PrefixAlways},
		{name: "override of a zero Naming", server: PrefixOnCollision, want: PrefixOnCollision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{Naming: ServerNaming{PrefixMode: tt.server}}
			if got := s.PrefixMode(Naming{PrefixMode: tt.global}); got != tt.want {
				t.Errorf("PrefixMode = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestServer_Namespace(t *testing.T) {
	tests := []struct {
		name   string
		server string // the server's own resources.namespace
		global string // the gateway's resources.namespace
		want   string
	}{
		{name: "inherits the gateway's", global: NamespaceNever, want: NamespaceNever},
		{name: "overrides the gateway's", server: NamespaceAlways, global: NamespaceNever, want: NamespaceAlways},
		{name: "same as the gateway's", server: NamespaceAuto, global: NamespaceAuto, want: NamespaceAuto},
		{name: "zero Resources means the default", want: NamespaceAuto},
		{name: "override of a zero Resources", server: NamespaceNever, want: NamespaceNever},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{Resources: ServerResources{Namespace: tt.server}}
			if got := s.Namespace(Resources{Namespace: tt.global}); got != tt.want {
				t.Errorf("Namespace = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestToolOptions_Visible(t *testing.T) {
	tests := []struct {
		name  string
		tools ToolOptions
		tool  string
		want  bool
	}{
		{name: "no options: all", tool: "anything", want: true},
		{name: "empty lists: all", tools: ToolOptions{Allow: []string{}, Deny: []string{}}, tool: "x", want: true},
		{name: "allowed by a glob", tools: ToolOptions{Allow: []string{"read_*", "list_*"}}, tool: "list_dir", want: true},
		{name: "not allowed", tools: ToolOptions{Allow: []string{"read_*", "list_*"}}, tool: "write_file"},
		{name: "allow matches the whole name", tools: ToolOptions{Allow: []string{"read"}}, tool: "read_file"},
		{name: "exact name", tools: ToolOptions{Allow: []string{"read_file"}}, tool: "read_file", want: true},
		{name: "? is one character", tools: ToolOptions{Allow: []string{"v?"}}, tool: "v1", want: true},
		{name: "character class", tools: ToolOptions{Allow: []string{"[a-c]*"}}, tool: "delete", want: false},
		{name: "denied without allow", tools: ToolOptions{Deny: []string{"*delete*"}}, tool: "bulk_delete_rows"},
		{name: "not denied", tools: ToolOptions{Deny: []string{"*delete*"}}, tool: "read_file", want: true},
		{name: "deny beats allow", tools: ToolOptions{Allow: []string{"*"}, Deny: []string{"*delete*"}}, tool: "delete_file"},
		{name: "allowed and not denied", tools: ToolOptions{Allow: []string{"*_file"}, Deny: []string{"*delete*"}}, tool: "read_file", want: true},
		{name: "* does not cross /", tools: ToolOptions{Allow: []string{"*"}}, tool: "a/b"},
		{name: "escaped *", tools: ToolOptions{Allow: []string{`a\*`}}, tool: "a*", want: true},
		{name: "escaped * is literal", tools: ToolOptions{Allow: []string{`a\*`}}, tool: "ab"},
		{name: "bad allow glob matches nothing", tools: ToolOptions{Allow: []string{"[a-"}}, tool: "[a-"},
		{name: "bad deny glob hides nothing", tools: ToolOptions{Deny: []string{"*["}}, tool: "x[", want: true},
		{name: "a bad glob beside a good one", tools: ToolOptions{Allow: []string{"[", "x"}}, tool: "x", want: true},
		{name: "rename and describe do not filter", tools: ToolOptions{Rename: map[string]string{"a": "b"}, Describe: map[string]string{"a": "d"}}, tool: "b", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tools.Visible(tt.tool); got != tt.want {
				t.Errorf("Visible(%q) = %v; want %v", tt.tool, got, tt.want)
			}
		})
	}
}
