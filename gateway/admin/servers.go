package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/store"
)

// maxBody bounds a request body of the API.
const maxBody = 1 << 20

// storeTimeout bounds one store operation of a request.
const storeTimeout = 10 * time.Second

// view returns a server's status as the API shows it: the manager's status
// with its source ("config" or "api"), or false for an unknown server.
func (a *API) view(name string) (json.RawMessage, bool) {
	vs := a.views(func(n string) bool { return n == name })
	if len(vs) == 0 {
		return nil, false
	}
	return vs[0], true
}

// views returns, as the API shows them, the statuses of the servers whose
// names keep accepts, from one snapshot.
func (a *API) views(keep func(name string) bool) []json.RawMessage {
	out := []json.RawMessage{}
	perReplica := a.replicaStates()
	for _, st := range a.opts.Core.Servers() {
		if !keep(st.Name) {
			continue
		}
		b, err := json.Marshal(st)
		if err != nil {
			continue
		}
		v, err := rawjson.Set(b, "source", json.RawMessage(strconv.Quote(a.source(st.Name))))
		if err != nil {
			continue
		}
		if sc, ok := a.opts.Servers.ServerConfig(st.Name); ok && sc.OAuth != nil && a.opts.Accounts != nil {
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			n, err := a.opts.Accounts.Count(ctx, st.Name)
			cancel()
			if err == nil {
				if v, err = rawjson.Set(v, "oauth_connected", mustMarshal(n)); err != nil {
					continue
				}
			}
		}
		if perReplica != nil {
			states := map[string]string{}
			for id, servers := range perReplica {
				if state, ok := servers[st.Name]; ok {
					states[id] = state
				}
			}
			if v, err = rawjson.Set(v, "replicas", mustMarshal(states)); err != nil {
				continue
			}
		}
		out = append(out, v)
	}
	return out
}

// replicaStates returns, by replica, each server's state there, as the
// replicas last recorded it; nil when the gateway runs alone.
func (a *API) replicaStates() map[string]map[string]string {
	if a.opts.Replicas == nil {
		return nil
	}
	out := map[string]map[string]string{}
	for _, r := range a.opts.Replicas() {
		servers := map[string]string{}
		if len(r.Servers) > 0 && json.Unmarshal(r.Servers, &servers) != nil {
			continue
		}
		out[r.ID] = servers
	}
	return out
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func (a *API) listServers(c echo.Context) error {
	all := a.views(func(string) bool { return true })
	return c.JSON(http.StatusOK, map[string]any{"servers": all})
}

// answer answers the request with status and the server's status after a
// change, or 404 when the server is gone.
func (a *API) answer(c echo.Context, status int, name string) error {
	v, ok := a.view(name)
	if !ok {
		return fail(c, http.StatusNotFound, "unknown server "+quote(name))
	}
	return c.JSON(status, v)
}

func (a *API) getServer(c echo.Context) error {
	v, ok := a.view(c.Param("name"))
	if !ok {
		return unknown(c)
	}
	return c.JSON(http.StatusOK, v)
}

func unknown(c echo.Context) error {
	return fail(c, http.StatusNotFound, "unknown server "+quote(c.Param("name")))
}

// refusal is a request's fault that a helper of a handler found: the
// handler answers it with reply.
type refusal struct {
	status int
	body   errorBody
}

func (r *refusal) Error() string { return r.body.Message }

// refuse returns the refusal of a request with status, msg and problems.
func refuse(status int, msg string, probs ...problem) error {
	return &refusal{status: status, body: errorBody{Message: msg, Problems: probs}}
}

// reply answers a refusal to the client, and returns other errors to
// echo.
func reply(c echo.Context, err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return c.JSON(r.status, r.body)
	}
	return err
}

// readBody reads a JSON object body, or returns a refusal that says why
// not.
func readBody(c echo.Context) (json.RawMessage, error) {
	r := c.Request()
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != echo.MIMEApplicationJSON {
		return nil, refuse(http.StatusUnsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxBody))
		}
		return nil, refuse(http.StatusBadRequest, "reading the body failed")
	}
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return nil, refuse(http.StatusBadRequest, "the body is not valid JSON")
	}
	if len(body) == 0 || body[0] != '{' {
		return nil, refuse(http.StatusBadRequest, "the body must be a JSON object")
	}
	return body, nil
}

// parseEntry validates a server entry of a request like an entry of the
// config file, with the API's limit on environment variables. On a
// problem it returns a refusal.
func (a *API) parseEntry(body json.RawMessage) (config.Server, error) {
	// The document's name is a string; YAML, which ParseServer reads,
	// would take 7 for "7".
	if raw, ok, _ := rawjson.Get(body, "name"); ok {
		if _, isString := rawjson.String(body, "name"); !isString {
			return config.Server{}, refuse(http.StatusBadRequest, "invalid server entry: name: must be a string, not "+quote(string(raw)),
				problem{Field: "name", Message: "must be a string"})
		}
	}
	var refused []string
	lookup := func(name string) (string, bool) {
		if !strings.HasPrefix(name, a.opts.EnvPrefix) {
			refused = append(refused, name)
			return "", false
		}
		return a.opts.LookupEnv(name)
	}
	srv, ps := config.ParseServer(body, a.opts.Naming, lookup)
	if len(refused) > 0 {
		msg := fmt.Sprintf("may use only environment variables whose names start with %s (admin.env_prefix)", a.opts.EnvPrefix)
		fields, without := a.refusedFields(body, refused)
		var probs []problem
		for _, f := range fields {
			probs = append(probs, problem{Field: f, Message: msg})
		}
		for _, p := range ps {
			// Not also "is not set" for a refused variable.
			if !slices.Contains(fields, p.Path) || slices.Contains(without, p) {
				probs = append(probs, problem{Field: p.Path, Message: p.Message})
			}
		}
		return srv, refuse(http.StatusBadRequest,
			fmt.Sprintf("a server registered through the admin API %s; not ${%s}", msg, refused[0]),
			probs...)
	}
	if len(ps) > 0 {
		probs := make([]problem, 0, len(ps))
		for _, p := range ps {
			probs = append(probs, problem{Field: p.Path, Message: p.Message})
		}
		msg := ps[0].Message
		if ps[0].Path != "" {
			msg = ps[0].Path + ": " + msg
		}
		return srv, refuse(http.StatusBadRequest, "invalid server entry: "+msg, probs...)
	}
	return srv, nil
}

// refusedFields returns the keys of the entry's values that name one of
// the refused variables, as paths like ParseServer's problems have them,
// and the entry's problems but for those of the refused variables: the
// entry is parsed again with each refused variable set to a marker, which
// is looked for in the values ParseServer expands.
func (a *API) refusedFields(body json.RawMessage, refused []string) ([]string, config.Problems) {
	const marker = "mcpgw-refused-variable"
	srv, ps := config.ParseServer(body, a.opts.Naming, func(name string) (string, bool) {
		if slices.Contains(refused, name) {
			return marker, true
		}
		return a.opts.LookupEnv(name)
	})
	var fields []string
	add := func(path, v string) {
		if strings.Contains(v, marker) {
			fields = append(fields, path)
		}
	}
	add("url", srv.URL)
	add("api_key", srv.APIKey)
	for _, m := range []struct {
		key  string
		vals map[string]string
	}{{"headers", srv.Headers}, {"env", srv.Env}} {
		for _, k := range slices.Sorted(maps.Keys(m.vals)) {
			add(keyPath(m.key, k), m.vals[k])
		}
	}
	return fields, ps
}

// keyPath returns the path of key in the map at section, written as
// config's problems write it.
func keyPath(section, key string) string {
	for _, c := range []byte(key) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return section + "[" + strconv.Quote(key) + "]"
		}
	}
	if key == "" {
		return section + `[""]`
	}
	return section + "." + key
}

// mayRun refuses, with 403, a stdio server that runs a command with
// arguments, a working directory or variables admin.stdio_commands,
// admin.stdio_cwd and admin.stdio_env do not allow. The message names the
// command, the position of the first argument refused, the cwd key or the
// variable: never an argument (they often hold keys), the cwd or a
// variable's value.
func (a *API) mayRun(srv config.Server) error {
	ps := a.limits.CheckRegistration(&srv)
	if len(ps) == 0 {
		return nil
	}
	probs := make([]problem, 0, len(ps))
	for _, p := range ps {
		probs = append(probs, problem{Field: p.Path, Message: p.Message})
	}
	var what string
	switch p := ps[0]; {
	case p.Path == "command":
		what = "command " + quote(srv.Command)
	case p.Path == "args":
		// The message names the argument by its position.
		return refuse(http.StatusForbidden, p.Message, probs...)
	default:
		what = strings.Replace(p.Path, ".", " ", 1) // env.NAME: the name, not the value
	}
	return refuse(http.StatusForbidden, what+" "+ps[0].Message, probs...)
}

// inFile answers that a server lives in the config file.
func inFile(c echo.Context, name string) error {
	return fail(c, http.StatusConflict, fmt.Sprintf("server %s is defined in the config file: edit the file and reload (POST /admin/reload) to change it", quote(name)))
}

// postServer registers a server, or replaces one registered before.
func (a *API) postServer(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return reply(c, err)
	}
	srv, err := a.parseEntry(body)
	if err != nil {
		return reply(c, err)
	}
	return a.register(c, srv, body, false)
}

// putServer replaces a registered server.
func (a *API) putServer(c echo.Context) error {
	name := c.Param("name")
	body, err := readBody(c)
	if err != nil {
		return reply(c, err)
	}
	if a.isConfig(name) {
		return inFile(c, name)
	}
	// A name that is not a string is parseEntry's to refuse.
	_, hasName, _ := rawjson.Get(body, "name")
	switch got, isString := rawjson.String(body, "name"); {
	case !hasName:
		if body, err = rawjson.Set(body, "name", json.RawMessage(strconv.Quote(name))); err != nil {
			return fail(c, http.StatusBadRequest, "the body must be a JSON object")
		}
	case isString && got != name:
		return c.JSON(http.StatusBadRequest, errorBody{
			Message:  fmt.Sprintf("the body's name %s differs from the path's %s; a server cannot be renamed", quote(got), quote(name)),
			Problems: []problem{{Field: "name", Message: "must be " + quote(name) + " or left out"}},
		})
	}
	srv, err := a.parseEntry(body)
	if err != nil {
		return reply(c, err)
	}
	return a.register(c, srv, body, true)
}

// register applies a valid entry: the manager first, then the store; if
// the store fails, the manager is put back as it was.
func (a *API) register(c echo.Context, srv config.Server, body json.RawMessage, mustExist bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.isConfig(srv.Name) {
		return inFile(c, srv.Name)
	}
	old, exists := a.opts.Servers.ServerConfig(srv.Name)
	if mustExist && !exists {
		return fail(c, http.StatusNotFound, "unknown server "+quote(srv.Name)+"; register it with POST /admin/servers")
	}
	if err := a.mayRun(srv); err != nil {
		return reply(c, err)
	}
	ctx, cancel := a.storeContext(c)
	defer cancel()
	var enabled *bool
	switch prev, err := a.opts.Store.GetServer(ctx, srv.Name); {
	case err == nil:
		enabled = prev.Enabled
	case !errors.Is(err, store.ErrNotFound):
		// Going on would lose a PATCH's switch.
		return a.internal(c, "reading server "+quote(srv.Name), err)
	}
	if _, set, _ := rawjson.Get(body, "enabled"); set {
		// The entry says it itself: it replaces a PATCH's switch.
		enabled = nil
	} else if enabled != nil {
		// A PATCH's switch outlives a replacement that does not say.
		srv.Enabled = enabled
	}
	if exists {
		err := a.opts.Servers.Replace(srv)
		if err != nil {
			return a.internal(c, "replacing server "+quote(srv.Name), err)
		}
	} else if err := a.opts.Servers.Add(srv); err != nil {
		return a.internal(c, "adding server "+quote(srv.Name), err)
	}
	var compact bytes.Buffer
	json.Compact(&compact, body)
	if _, err := a.opts.Store.PutServer(ctx, store.Server{Name: srv.Name, Source: store.ServerSourceAPI, Entry: compact.Bytes(), Enabled: enabled}); err != nil {
		var undo error
		if exists {
			undo = a.opts.Servers.Replace(old)
		} else {
			undo = a.opts.Servers.Remove(srv.Name)
		}
		if undo != nil {
			a.logger.Error("admin API: undoing a registration the store did not keep failed; the server runs until the gateway restarts", "server", srv.Name, "err", undo)
		}
		return a.internal(c, "storing server "+quote(srv.Name), err)
	}
	a.logger.Info("server registered through the admin API", "server", srv.Name, "replaced", exists)
	status := http.StatusCreated
	if exists {
		status = http.StatusOK
	} else {
		c.Response().Header().Set("Location", "/admin/servers/"+srv.Name)
	}
	return a.answer(c, status, srv.Name)
}

// storeContext returns the context of a change's store operations: bound,
// and not canceled when the client goes, which would leave the change
// half made.
func (a *API) storeContext(c echo.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(c.Request().Context()), storeTimeout)
}

// internal logs a failure of the gateway and answers 500 without its
// details.
func (a *API) internal(c echo.Context, what string, err error) error {
	a.logger.Error("admin API: "+what+" failed", "err", err)
	return fail(c, http.StatusInternalServerError, what+" failed; see the gateway's log")
}

// patchServer switches a server on or off: {"enabled": true|false}.
func (a *API) patchServer(c echo.Context) error {
	name := c.Param("name")
	body, err := readBody(c)
	if err != nil {
		return reply(c, err)
	}
	var patch struct {
		Enabled *bool `json:"enabled"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&patch); err != nil || patch.Enabled == nil {
		return c.JSON(http.StatusBadRequest, errorBody{
			Message:  `the body must be {"enabled": true} or {"enabled": false}; other fields cannot be patched (replace the server with PUT)`,
			Problems: []problem{{Field: "enabled", Message: "must be true or false"}},
		})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.opts.Servers.ServerConfig(name); !ok {
		return unknown(c)
	}
	ctx, cancel := a.storeContext(c)
	defer cancel()
	prev, err := a.opts.Store.GetServer(ctx, name)
	stored := err == nil
	switch {
	case errors.Is(err, store.ErrNotFound):
		prev = store.Server{Name: name, Source: store.ServerSourceConfig}
	case err != nil:
		return a.internal(c, "reading server "+quote(name), err)
	}
	rec := prev
	if a.isConfig(name) {
		rec.Source, rec.Entry = store.ServerSourceConfig, nil
	}
	rec.Enabled = patch.Enabled
	if _, err := a.opts.Store.PutServer(ctx, rec); err != nil {
		return a.internal(c, "storing server "+quote(name), err)
	}
	if err := a.opts.Servers.SetEnabled(name, *patch.Enabled); err != nil {
		// Put the store back as it was, so that it agrees with the
		// manager, now and after a restart.
		var undo error
		if stored {
			_, undo = a.opts.Store.PutServer(ctx, prev)
		} else {
			undo = a.opts.Store.DeleteServer(ctx, name)
		}
		if undo != nil {
			a.logger.Error("admin API: undoing a stored switch failed; it applies at the next start", "server", name, "err", undo)
		}
		return a.internal(c, "switching server "+quote(name), err)
	}
	a.logger.Info("server switched through the admin API", "server", name, "enabled", *patch.Enabled)
	return a.answer(c, http.StatusOK, name)
}

// deleteServer unregisters a server registered through the API.
func (a *API) deleteServer(c echo.Context) error {
	name := c.Param("name")
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.isConfig(name) {
		return inFile(c, name)
	}
	if _, ok := a.opts.Servers.ServerConfig(name); !ok {
		return unknown(c)
	}
	ctx, cancel := a.storeContext(c)
	defer cancel()
	prev, err := a.opts.Store.GetServer(ctx, name)
	stored := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return a.internal(c, "reading server "+quote(name), err)
	}
	if err := a.opts.Store.DeleteServer(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return a.internal(c, "deleting server "+quote(name), err)
	}
	if err := a.opts.Servers.Remove(name); err != nil {
		// Keep the record of the server that still runs.
		if stored {
			if _, undo := a.opts.Store.PutServer(ctx, prev); undo != nil {
				a.logger.Error("admin API: undoing a deletion failed; the server is gone at the next start", "server", name, "err", undo)
			}
		}
		return a.internal(c, "removing server "+quote(name), err)
	}
	if a.opts.Accounts != nil {
		// Its principals' tokens and the gateway's registrations go
		// with it: a server registered later under the name is another.
		if err := a.opts.Accounts.Forget(ctx, name); err != nil {
			a.logger.Warn("admin API: forgetting a deleted server's accounts failed", "server", name, "err", err)
		}
	}
	a.logger.Info("server deleted through the admin API", "server", name)
	return c.NoContent(http.StatusNoContent)
}

// restartServer stops a server and starts it again now.
func (a *API) restartServer(c echo.Context) error {
	name := c.Param("name")
	// Not while another request changes the server.
	a.mu.Lock()
	defer a.mu.Unlock()
	sc, ok := a.opts.Servers.ServerConfig(name)
	if !ok {
		return unknown(c)
	}
	if !sc.IsEnabled() {
		return fail(c, http.StatusConflict, fmt.Sprintf("server %s is disabled; enable it with PATCH {\"enabled\": true}", quote(name)))
	}
	if err := a.opts.Servers.Restart(name); err != nil {
		return a.internal(c, "restarting server "+quote(name), err)
	}
	a.logger.Info("server restarted through the admin API", "server", name)
	return a.answer(c, http.StatusAccepted, name)
}

func (a *API) serverTools(c echo.Context) error {
	name := c.Param("name")
	if _, ok := a.opts.Servers.ServerConfig(name); !ok {
		return unknown(c)
	}
	return c.JSON(http.StatusOK, map[string]any{"tools": a.opts.Core.Tools(name)})
}

func (a *API) tools(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"tools": a.opts.Core.Tools("")})
}

// Bounds of GET /admin/servers/{name}/logs.
const (
	defaultTail = 100
	maxTail     = 10000
	// maxTailBytes bounds how much of the end of a log file is read.
	maxTailBytes = 4 << 20
)

// serverLogs returns the last lines of a server's log file.
func (a *API) serverLogs(c echo.Context) error {
	name := c.Param("name")
	if _, ok := a.opts.Servers.ServerConfig(name); !ok {
		return unknown(c)
	}
	n, ok := queryCount(c, "tail", defaultTail, maxTail)
	if !ok {
		return outOfRange(c, "tail", maxTail)
	}
	lines, err := tail(a.opts.Servers.LogPath(name), n)
	if err != nil {
		return a.internal(c, "reading the log of server "+quote(name), err)
	}
	return c.JSON(http.StatusOK, map[string]any{"server": name, "lines": lines})
}

// tail returns the last n lines of the file at path (none when there is no
// file), reading at most maxTailBytes of its end.
func tail(path string, n int) ([]string, error) {
	lines := []string{}
	if path == "" {
		return lines, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return lines, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// Read from one byte before the bound, to tell whether the first
	// line there is whole.
	off := max(fi.Size()-maxTailBytes-1, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	text := string(buf)
	if off > 0 {
		// Drop the byte before the bound, and the rest of the line it
		// is in, if it does not end one.
		_, text, _ = strings.Cut(text, "\n")
	}
	all := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(all) == 1 && all[0] == "" {
		return lines, nil
	}
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return append(lines, all...), nil
}

// disconnect serves DELETE /admin/servers/{name}/oauth/{principal}: the
// principal's token at the server is revoked where the server supports
// it, and forgotten.
func (a *API) disconnect(c echo.Context) error {
	name := c.Param("name")
	sc, ok := a.opts.Servers.ServerConfig(name)
	if !ok {
		return unknown(c)
	}
	if sc.OAuth == nil || a.opts.Accounts == nil {
		return fail(c, http.StatusNotFound, "server "+quote(name)+" has no oauth: no accounts are connected there")
	}
	principal, err := url.PathUnescape(c.Param("principal"))
	if err != nil || principal == "" {
		return fail(c, http.StatusBadRequest, "the principal in the path is not valid")
	}
	ctx, cancel := a.storeContext(c)
	defer cancel()
	if err := a.opts.Accounts.Disconnect(ctx, name, principal); err != nil {
		if a.opts.Accounts.NotConnected(err) {
			return fail(c, http.StatusNotFound, "principal "+quote(principal)+" has no account connected at server "+quote(name))
		}
		return a.internal(c, "disconnecting an account at server "+quote(name), err)
	}
	a.logger.Info("account disconnected through the admin API", "server", name, "principal", principal)
	return c.NoContent(http.StatusNoContent)
}
