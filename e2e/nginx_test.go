package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// envRequireNginx makes a test that finds no nginx fail instead of
// skipping: CI installs it.
const envRequireNginx = "MCPGW_REQUIRE_NGINX"

// freeAddr returns a loopback address no one listens on now, for a
// process that cannot report the port it bound (nginx), or that must come
// back on the same one (a replica restarted).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startNginx runs Debian's nginx as a load balancer in front of backends
// (host:port), as one runs in front of replicas: round robin, no
// affinity, streams unbuffered, a backend that refuses connections left
// out for a moment. It returns nginx's base URL.
func startNginx(t *testing.T, backends []string) string {
	t.Helper()
	path, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr == nil {
			path = "/usr/sbin/nginx"
		} else if os.Getenv(envRequireNginx) == "1" {
			t.Fatalf("nginx is not installed, and %s=1", envRequireNginx)
		} else {
			t.Skip("nginx is not installed (Debian's nginx-light); .ci/run installs it")
		}
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	var servers strings.Builder
	for _, b := range backends {
		fmt.Fprintf(&servers, "    server %s max_fails=1 fail_timeout=1s;\n", b)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // its workers write their temp files in dir
	}
	conf := fmt.Sprintf(`%[4]s
daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream replicas {
%[2]s    keepalive 32;
  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 1h;
    }
  }
}
`, dir, servers.String(), addr, user)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startCmd(t, "nginx", exec.Command(path, "-p", dir, "-c", confPath, "-e", "stderr"))
	p.waitLine(t, "nginx's workers", func(l string) string {
		if strings.Contains(l, "start worker process") {
			return l
		}
		return ""
	})
	return "http://" + addr
}
