package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// manyServers returns n fake servers with m tools each, with schemas of a
// realistic size.
func manyServers(n, m int) *upstreamtest.Manager {
	var servers []*upstreamtest.Server
	for i := range n {
		s := &upstreamtest.Server{Name: fmt.Sprintf("server-%03d", i)}
		for j := range m {
			s.Tools = append(s.Tools, json.RawMessage(fmt.Sprintf(
				`{"name":"tool_%03d","description":"Does thing %d of server %d.","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"A path."},"limit":{"type":"integer","minimum":1}},"required":["path"],"additionalProperties":false},"annotations":{"readOnlyHint":true}}`,
				j, j, i)))
		}
		servers = append(servers, s)
	}
	return upstreamtest.NewManager(servers...)
}

// BenchmarkCatalogBuild merges 100 servers × 100 tools: what a change of
// one server costs.
func BenchmarkCatalogBuild(b *testing.B) {
	for _, mode := range []string{config.PrefixAlways, config.PrefixOnCollision, config.PrefixNever} {
		b.Run(mode, func(b *testing.B) {
			s, err := New(Options{Upstreams: manyServers(100, 100), Naming: config.Naming{PrefixMode: mode}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ReportAllocs()
			for b.Loop() {
				s.rebuild()
			}
		})
	}
}

// BenchmarkToolsList serves a tools/list of 10,000 tools (100 servers ×
// 100 tools): as one full page (the default), and as pages of 100.
func BenchmarkToolsList(b *testing.B) {
	for _, pageSize := range []int{0, 100} {
		b.Run(fmt.Sprintf("page_size=%d", pageSize), func(b *testing.B) {
			s, err := New(Options{Upstreams: manyServers(100, 100), PageSize: pageSize})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			req := &Request{Method: "tools/list", Principal: Anonymous}
			res, err := s.Handle(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(res.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Handle(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
