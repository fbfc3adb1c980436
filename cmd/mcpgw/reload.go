package main

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/gateway"
	"github.com/mcpgw/mcpgw/gateway/admin"
	"github.com/mcpgw/mcpgw/upstream"
)

// reloader re-reads the config file and applies what changed in its
// servers live (POST /admin/reload, SIGHUP). The gateway's own settings
// are read once at start: a reload reports those that changed as needing a
// restart, and changes nothing else.
type reloader struct {
	path   string // the config file; "" when it came from elsewhere
	lookup func(string) (string, bool)
	mgr    *upstream.Manager
	db     admin.ServerStore
	adm    *admin.API
	core   *gateway.Server
	logger *slog.Logger

	mu  sync.Mutex
	cfg *config.Config // the config in effect
	// skipped remembers, by server, the record sync last refused, so
	// that it says so once.
	skipped map[string]time.Time
}

// reload applies the config file's current servers. On a problem in the
// file nothing is applied and the problems are returned.
func (r *reloader) reload(ctx context.Context) (admin.ReloadResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.path == "" {
		return admin.ReloadResult{}, fmt.Errorf("the gateway runs on its embedded config; there is no file to reload")
	}
	next, problems, err := config.Load(r.path, r.lookup)
	if err != nil {
		return admin.ReloadResult{}, fmt.Errorf("reading %s: %w", r.path, err)
	}
	if len(problems) > 0 {
		// A bad server entry would silently drop that server: refuse the
		// whole file instead, so that nothing is half-applied.
		res := admin.ReloadResult{}
		for _, p := range problems {
			res.Problems = append(res.Problems, p.String())
		}
		return res, fmt.Errorf("the config file has %d problem(s); nothing was changed", len(problems))
	}
	res := admin.ReloadResult{RestartNeeded: changedSettings(r.cfg, next)}

	old := map[string]config.Server{}
	for _, sc := range r.cfg.Servers {
		old[sc.Name] = sc
	}
	overrides := map[string]*bool{}
	if recs, err := r.db.ListServers(ctx); err == nil {
		for _, rec := range recs {
			overrides[rec.Name] = rec.Enabled
		}
	} else {
		return admin.ReloadResult{}, fmt.Errorf("reading the registered servers: %w", err)
	}
	withOverride := func(sc config.Server) config.Server {
		if e := overrides[sc.Name]; e != nil {
			sc.Enabled = e
		}
		return sc
	}
	for _, sc := range next.Servers {
		prev, had := old[sc.Name]
		delete(old, sc.Name)
		switch _, live := r.mgr.ServerConfig(sc.Name); {
		case had && reflect.DeepEqual(prev, sc):
			res.Unchanged = append(res.Unchanged, sc.Name)
		case live:
			if err := r.mgr.Replace(withOverride(sc)); err != nil {
				return res, fmt.Errorf("replacing server %q: %w", sc.Name, err)
			}
			res.Replaced = append(res.Replaced, sc.Name)
		default:
			if err := r.mgr.Add(withOverride(sc)); err != nil {
				return res, fmt.Errorf("adding server %q: %w", sc.Name, err)
			}
			res.Added = append(res.Added, sc.Name)
		}
	}
	for name := range old {
		if err := r.mgr.Remove(name); err != nil {
			return res, fmt.Errorf("removing server %q: %w", name, err)
		}
		res.Removed = append(res.Removed, name)
	}
	slices.Sort(res.Removed)
	var names []string
	for _, sc := range next.Servers {
		names = append(names, sc.Name)
	}
	r.adm.SetConfigServers(names)
	// Which server keeps its resource URIs bare follows the file's order,
	// as it would at a start on this file.
	r.core.SetServerOrder(names)
	// Only the servers changed: the rest of the config stays what it was
	// at start until a restart.
	kept := *r.cfg
	kept.Servers = next.Servers
	r.cfg = &kept
	r.logger.Info("config reloaded", "added", res.Added, "removed", res.Removed, "replaced", res.Replaced, "restart_needed", res.RestartNeeded)
	return res, nil
}

// changedSettings names the gateway settings (top-level keys, servers
// aside) that differ between a and b.
func changedSettings(a, b *config.Config) []string {
	var out []string
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	t := va.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" || key == "-" || key == "servers" {
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, key)
		}
	}
	return out
}
