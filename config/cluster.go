package config

import (
	"fmt"
	"net"
	"net/url"
)

// Cluster makes the gateway one replica of several that share one store:
// each serves any request, and one that needs what another replica holds
// (a legacy session's streams and calls) is forwarded to it.
type Cluster struct {
	// Enabled turns the replica's part on: it records itself in the
	// store, and sessions of other replicas go to them.
	Enabled bool `yaml:"enabled"`
	// ReplicaID names this replica in the session ids it issues; unique
	// among the live replicas. ${VAR} is expanded. Default: the host name.
	ReplicaID string `yaml:"replica_id"`
	// SelfURL is where the other replicas reach this one directly, such
	// as http://10.1.2.3:8080 (in Kubernetes, the pod IP). ${VAR} is
	// expanded. Default: http://<listen> when listen names an IP address.
	SelfURL string `yaml:"self_url"`
}

// validateCluster checks c's cluster settings.
func (c *Config) validateCluster(add func(path, format string, args ...any)) {
	cl := c.Cluster
	if !cl.Enabled {
		if cl.ReplicaID != "" || cl.SelfURL != "" {
			add("cluster", "replica_id and self_url take effect only with cluster.enabled: true")
		}
		return
	}
	if c.Secret == "" {
		add("cluster.enabled", "a cluster needs secret: every replica must open the session ids and forwarding tokens of the others, so all of them need the same secret")
	}
	if len(cl.ReplicaID) > 128 {
		add("cluster.replica_id", "is longer than 128 bytes")
	}
	if cl.SelfURL == "" {
		host, _, err := net.SplitHostPort(c.Listen)
		if ip := net.ParseIP(host); err == nil && (ip == nil || ip.IsUnspecified()) {
			add("cluster.self_url", "is needed: listen %q does not say at which address the other replicas reach this one (set it, e.g. http://${POD_IP}:8080)", c.Listen)
		}
		return
	}
	u, err := url.Parse(cl.SelfURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		add("cluster.self_url", "is not an absolute http or https URL")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		add("cluster.self_url", "must be scheme://host:port only: no user, path, query or fragment")
	}
}

// URL is where the other replicas reach this one, given the address
// the gateway listens on (its port once bound).
func (cl Cluster) URL(listening net.Addr) string {
	if cl.SelfURL != "" {
		return cl.SelfURL
	}
	return fmt.Sprintf("http://%s", listening)
}
