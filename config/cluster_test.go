package config

import (
	"net"
	"strings"
	"testing"
)

func TestParse_Cluster(t *testing.T) {
	const secret = "secret: " + "0123456789abcdef0123456789abcdef\n"
	env := map[string]string{"POD_IP": "10.1.2.3", "POD_NAME": "mcpgw-0"}
	tests := []struct {
		name    string
		yaml    string
		want    Cluster
		problem string
	}{
		{"off", "listen: 127.0.0.1:8080\n", Cluster{}, ""},
		{"expanded", secret + "cluster: {enabled: true, replica_id: '${POD_NAME}', self_url: 'http://${POD_IP}:8080'}\n",
			Cluster{Enabled: true, ReplicaID: "mcpgw-0", SelfURL: "http://10.1.2.3:8080"}, ""},
		{"self_url from listen", secret + "listen: 127.0.0.1:0\ncluster: {enabled: true}\n", Cluster{Enabled: true}, ""},
		{"no secret", "cluster: {enabled: true, self_url: http://10.0.0.1:8080}\n", Cluster{}, "cluster.enabled: a cluster needs secret"},
		{"no address", secret + "listen: :8080\ncluster: {enabled: true}\n", Cluster{}, `cluster.self_url: is needed: listen ":8080"`},
		{"relative", secret + "cluster: {enabled: true, self_url: /mcp}\n", Cluster{}, "cluster.self_url: is not an absolute http or https URL"},
		{"a path", secret + "cluster: {enabled: true, self_url: http://10.0.0.1:8080/mcp}\n", Cluster{}, "must be scheme://host:port only"},
		{"credentials", secret + "cluster: {enabled: true, self_url: http://u:p@10.0.0.1:8080}\n", Cluster{}, "must be scheme://host:port only"},
		{"unset variable", secret + "cluster: {enabled: true, self_url: 'http://${NOPE}:8080'}\n", Cluster{}, "cluster.self_url: environment variable NOPE is not set"},
		{"while off", "cluster: {self_url: http://10.0.0.1:8080}\n", Cluster{}, "cluster: replica_id and self_url take effect only with cluster.enabled: true"},
		{"unknown key", secret + "cluster: {enabled: true, self_url: http://10.0.0.1:8080, peers: []}\n", Cluster{}, "peers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ps := Parse([]byte(tt.yaml), lookup(env))
			if tt.problem != "" {
				if !ps.Fatal() || !strings.Contains(ps.Error(), tt.problem) {
					t.Fatalf("problems = %v, want one saying %q", ps, tt.problem)
				}
				if strings.Contains(ps.Error(), "u:p@") {
					t.Errorf("a problem shows credentials: %v", ps)
				}
				return
			}
			if ps.Fatal() || c.Cluster != tt.want {
				t.Fatalf("Cluster = %+v, problems %v; want %+v", c.Cluster, ps, tt.want)
			}
		})
	}
}

func TestCluster_URL(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 41234}
	if got := (Cluster{}).URL(addr); got != "http://127.0.0.1:41234" {
		t.Errorf("URL from the listener = %q", got)
	}
	if got := (Cluster{SelfURL: "http://10.0.0.1:8080"}).URL(addr); got != "http://10.0.0.1:8080" {
		t.Errorf("URL set = %q", got)
	}
}
