package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"
)

// Load reads the file at path and calls Parse. The error is non-nil only
// when the file cannot be read; everything wrong inside it is a Problem.
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, Problems, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	c, ps := Parse(data, lookupEnv)
	return c, ps, nil
}

// Parse decodes data strictly, applies the defaults, expands ${VAR} in the
// fields that allow it and validates the result. lookupEnv is usually
// os.LookupEnv; if nil, no variable is set.
//
// Every problem is reported, each with its key path. Problems with the
// gateway settings are Fatal: the caller must not start with that Config.
// A problem inside one server entry is not: that entry is left out of
// Config.Servers and the others stay. Parse always returns a Config, filled
// with the defaults where the file was silent, and returns nil Problems when
// there are none.
func Parse(data []byte, lookupEnv func(string) (string, bool)) (*Config, Problems) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	c := defaultConfig()
	root, p := parseDocument(data)
	if p != nil {
		return c, Problems{*p}
	}

	budget := maxValues
	d := &decoder{fatal: true, budget: &budget, pos: positions{}}
	var servers *yaml.Node
	if root != nil {
		if root.Kind != yaml.MappingNode {
			d.add("", "the file must be a mapping of settings, like \"listen: ...\" and \"servers: ...\", not "+describe(root))
		} else {
			cv := reflect.ValueOf(c).Elem()
			for _, kv := range d.pairs(root, "") {
				if kv.key == "servers" {
					servers = kv.value
					continue
				}
				d.field(kv, cv, "")
			}
		}
	}
	// The secret is best kept out of the file: ${VAR} is expanded in it.
	if c.Secret != "" {
		out, errs := expand(c.Secret, lookupEnv)
		for _, err := range errs {
			d.ps = append(d.ps, Problem{Path: "secret", Message: err.Error(), Fatal: true})
		}
		c.Secret = out
	}
	// So is the store's DSN, which holds a password.
	if c.Store.DSN != "" {
		out, errs := expand(c.Store.DSN, lookupEnv)
		for _, err := range errs {
			d.ps = append(d.ps, Problem{Path: "store.dsn", Message: err.Error(), Fatal: true})
		}
		c.Store.DSN = out
	}
	for _, f := range []struct {
		path string
		v    *string
	}{{"cluster.replica_id", &c.Cluster.ReplicaID}, {"cluster.self_url", &c.Cluster.SelfURL}} {
		if *f.v == "" {
			continue
		}
		out, errs := expand(*f.v, lookupEnv)
		for _, err := range errs {
			d.ps = append(d.ps, Problem{Path: f.path, Message: err.Error(), Fatal: true})
		}
		*f.v = out
	}
	c.setDefaults()
	ps := append(d.ps, c.validateGateway()...)

	if servers = resolve(servers); servers != nil && !isNull(servers) {
		if servers.Kind != yaml.SequenceNode {
			ps = append(ps, Problem{Path: "servers", Message: "must be a list of server entries, not " + describe(servers), Fatal: true})
		} else {
			used := map[string]int{} // name → index of its first entry
			for i, n := range servers.Content {
				if *d.budget < 0 {
					break
				}
				d.pos.note(serverPath(i, ""), n)
				s, sps := d.decodeServer(n, i, c.Naming, lookupEnv)
				if first, ok := used[s.Name]; ok && s.Name != "" {
					p := nameUsed(i, s.Name, first)
					d.pos.place(&p, join(p.Path, "name"))
					sps = append(sps, p)
				} else if s.Name != "" {
					used[s.Name] = i
				}
				ps = append(ps, sps...)
				if len(sps) == 0 {
					c.Servers = append(c.Servers, s)
				}
			}
		}
	}
	if *d.budget < 0 {
		ps = append(ps, Problem{Message: fmt.Sprintf("the file has more than %d values once its aliases are expanded", maxValues), Fatal: true})
	}
	if len(ps) == 0 {
		return c, nil
	}
	for i := range ps {
		if ps[i].Server == "" || !strings.HasPrefix(ps[i].Path, "servers[") { // decodeServer placed those
			d.pos.place(&ps[i], ps[i].Path)
		}
	}
	return c, ps
}

// positions are where the keys and list items of a file are, by path
// ("sessions.max", "servers[0]"), so that a problem can say its line.
type positions map[string]*yaml.Node

// maxPositions bounds the paths noted: real files have a few thousand,
// and aliases can make many more (maxValues).
const maxPositions = 100_000

// note records that the key or list item at path is n, unless path was
// noted already (a merged key after the mapping's own).
func (ps positions) note(path string, n *yaml.Node) {
	if _, ok := ps[path]; !ok && len(ps) < maxPositions && n != nil && n.Line > 0 {
		ps[path] = n
	}
}

// place gives p the position of path, or of its nearest enclosing path
// that the file writes (a missing key is reported at its mapping), unless
// p has one.
func (ps positions) place(p *Problem, path string) {
	if p.Line > 0 {
		return
	}
	for ; path != ""; path = parentPath(path) {
		if n, ok := ps[path]; ok {
			p.Line, p.Column = n.Line, n.Column
			return
		}
	}
}

// parentPath returns path without its last key or index (join's
// inverse): "a.b" → "a", `a["x y"]` → "a", "a[2]" → "a", "a" → "".
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		for i := strings.LastIndexByte(path, '['); i >= 0; i = strings.LastIndexByte(path[:i], '[') {
			inner := path[i+1 : len(path)-1]
			if _, err := strconv.Atoi(inner); err == nil {
				return path[:i]
			}
			if _, err := strconv.Unquote(inner); err == nil && strings.HasPrefix(inner, `"`) {
				return path[:i]
			}
		}
		return ""
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// maxValues bounds the YAML values Parse visits, counting an aliased value
// each time it is used, so that aliases of aliases cannot make Parse run
// for ever. Real files have a few thousand.
const maxValues = 1_000_000

// parseDocument parses data into the root node of its single document, or
// nil for an empty file. A syntax error is a Fatal problem with its line.
func parseDocument(data []byte) (*yaml.Node, *Problem) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxProblem(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Problem{Message: "a second YAML document; the file must hold one", Line: next.Line, Column: next.Column, Fatal: true}
	case !errors.Is(err, io.EOF):
		return nil, syntaxProblem(err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil
		}
		root = root.Content[0]
	}
	if root = resolve(root); isNull(root) {
		return nil, nil
	}
	return root, nil
}

// syntaxProblem turns a YAML syntax error into a Fatal problem at the
// place the parser stopped (not the start of the block it was in).
func syntaxProblem(err error) *Problem {
	var le *yaml.LoadError
	if errors.As(err, &le) {
		return &Problem{Message: "invalid YAML: " + le.Message, Line: le.Mark.Line, Column: le.Mark.Column, Fatal: true}
	}
	return &Problem{Message: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: "), Fatal: true}
}

// defaultConfig is the Config of an empty file, before the defaults that
// depend on other settings (setDefaults).
func defaultConfig() *Config {
	return &Config{
		Listen:          DefaultListen,
		DataDir:         DefaultDataDir,
		CallTimeout:     Duration(DefaultCallTimeout),
		StartTimeout:    Duration(DefaultStartTimeout),
		ShutdownGrace:   Duration(DefaultShutdownGrace),
		MaxRequestBody:  DefaultMaxRequestBody,
		MaxResponseBody: DefaultMaxResponseBody,
		Sessions: Sessions{
			IdleTimeout:     Duration(DefaultSessionIdle),
			Max:             DefaultMaxSessions,
			MaxPerPrincipal: DefaultMaxPerPrincipal,
		},
		Naming: Naming{
			PrefixMode: PrefixAlways,
			Prefix:     DefaultPrefix,
			Separator:  DefaultSeparator,
			MaxLength:  DefaultMaxNameLength,
		},
		ListChangedDebounce: Duration(DefaultListChangedDebounce),
		Resources:           Resources{Namespace: NamespaceAuto},
		InputTimeout:        Duration(DefaultInputTimeout),
		ResumeWindow:        Duration(DefaultResumeWindow),
		StreamAfter:         Duration(DefaultStreamAfter),
		Tasks: Tasks{
			DefaultTTL:            Duration(DefaultTaskTTL),
			MaxTTL:                Duration(DefaultTaskMaxTTL),
			PollInterval:          Duration(DefaultTaskPollInterval),
			MaxHostedPerPrincipal: DefaultMaxHostedTasks,
			PromoteAfter:          Duration(DefaultTaskPromoteAfter),
		},
		Admin: Admin{EnvPrefix: DefaultAdminEnvPrefix},
		Media: Media{
			Mode:     MediaLink,
			MinBytes: DefaultMediaMinBytes,
			MaxBytes: DefaultMediaMaxBytes,
			MaxAge:   Duration(DefaultMediaMaxAge),
		},
		Log:   Log{Level: "info", Format: "json"},
		Store: Store{Driver: StoreSQLite},
	}
}

// DefaultServer is a server entry before its keys are decoded into it: the
// defaults of the keys a file may leave out. An entry built elsewhere (the
// admin API) starts from it before ValidateServer.
func DefaultServer() Server {
	return Server{
		Protocol:    ProtocolAuto,
		SessionMode: SessionShared,
		Pool:        Pool{Max: DefaultPoolMax, IdleTimeout: Duration(DefaultPoolIdle)},
		Restart: Restart{
			MaxAttempts:    DefaultRestartAttempts,
			InitialBackoff: Duration(DefaultRestartBackoff),
			MaxBackoff:     Duration(DefaultRestartMaxBackoff),
		},
	}
}

// setDefaults fills the server keys whose zero value, written in the file,
// means the default: protocol "" (ProtocolAuto), session_mode ""
// (SessionShared, or SessionPerPrincipal for a per-user oauth grant) and restart.max_attempts 0 (DefaultRestartAttempts).
func (s *Server) setDefaults() {
	if s.Protocol == "" {
		s.Protocol = ProtocolAuto
	}
	if s.SessionMode == "" && s.PerUser() {
		s.SessionMode = SessionPerPrincipal
	}
	if s.SessionMode == "" {
		s.SessionMode = SessionShared
	}
	if s.Restart.MaxAttempts == 0 {
		s.Restart.MaxAttempts = DefaultRestartAttempts
	}
}

// setDefaults fills the settings whose defaults depend on others: PublicURL
// from Listen, then AllowedHosts and AllowedOrigins from PublicURL. It also
// strips a trailing "/" from PublicURL and the origins.
func (c *Config) setDefaults() {
	if c.Store.Driver == StorePostgres && c.Store.MaxConns == 0 {
		c.Store.MaxConns = DefaultStoreMaxConns
	}
	if c.PublicURL == "" && validListen(c.Listen) {
		host, port, _ := net.SplitHostPort(c.Listen)
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "localhost"
		}
		c.PublicURL = "http://" + net.JoinHostPort(host, port)
	}
	c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
	for i, o := range c.AllowedOrigins {
		c.AllowedOrigins[i] = strings.TrimSuffix(o, "/")
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil || c.PublicURL == "" || checkPublicURL(c.PublicURL) != "" {
		return // validateGateway reports it; there is nothing to derive from
	}
	if len(c.AllowedHosts) == 0 {
		c.AllowedHosts = defaultHosts(u)
	}
	if len(c.AllowedOrigins) == 0 {
		c.AllowedOrigins = defaultOrigins(u)
	}
}

// defaultHosts are the Host values allowed by default: the public URL's
// host with its port and without (any port), and the loopback names.
func defaultHosts(u *url.URL) []string {
	host := bracket(strings.ToLower(u.Hostname()))
	var hs []string
	if p := u.Port(); p != "" && p != "0" {
		hs = append(hs, host+":"+p)
	}
	hs = append(hs, host, "localhost", "127.0.0.1", "[::1]")
	return dedupe(hs)
}

// defaultOrigins are the Origin values allowed by default: the public URL's
// origin (any port while its port is still 0) and the loopback origins,
// http and https, any port.
func defaultOrigins(u *url.URL) []string {
	host := bracket(strings.ToLower(u.Hostname()))
	if p := u.Port(); p != "" && p != "0" {
		host += ":" + p
	}
	origins := []string{u.Scheme + "://" + host}
	for _, h := range []string{"localhost", "127.0.0.1", "[::1]"} {
		origins = append(origins, "http://"+h, "https://"+h)
	}
	return dedupe(origins)
}

// bracket puts an IPv6 address in brackets.
func bracket(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

func dedupe(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// A decoder walks a yaml.Node tree against the Go types of the Config,
// reflecting over their yaml tags, so that each problem (unknown or repeated
// key, wrong type, bad value) gets its full key path. It decodes as it goes:
// a value with a problem keeps its default.
type decoder struct {
	ps     Problems
	fatal  bool      // whether problems are Fatal (gateway settings) or not (a server entry)
	budget *int      // values left to visit (maxValues); shared by all decoders of a Parse
	pos    positions // shared by all decoders of a Parse
}

func (d *decoder) add(path, msg string) {
	d.ps = append(d.ps, Problem{Path: path, Message: msg, Fatal: d.fatal})
}

// addAt adds a problem at n's position.
func (d *decoder) addAt(n *yaml.Node, path, msg string) {
	d.ps = append(d.ps, Problem{Path: path, Message: msg, Fatal: d.fatal, Line: n.Line, Column: n.Column})
}

// spend takes one from the budget and reports whether any is left.
func (d *decoder) spend() bool {
	*d.budget--
	return *d.budget >= 0
}

// A pair is one key and its value in a mapping.
type pair struct {
	key   string
	value *yaml.Node
}

// pairs returns the keys and values of the mapping n, reporting keys that
// are not strings and keys given twice. Merge keys ("<<: *defaults") are
// applied: their keys come after the mapping's own, which win.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var out []pair
	seen := map[string]*yaml.Node{}
	d.collect(n, path, &out, seen, true, map[*yaml.Node]bool{})
	return out
}

func (d *decoder) collect(n *yaml.Node, path string, out *[]pair, seen map[string]*yaml.Node, explicit bool, visited map[*yaml.Node]bool) {
	if visited[n] {
		return // a merge of a mapping into itself
	}
	visited[n] = true
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !d.spend() {
			return
		}
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			if explicit {
				d.addAt(k, path, "a key must be a string, not "+describe(k))
			}
			continue
		}
		if first, ok := seen[k.Value]; ok {
			if explicit {
				d.addAt(k, join(path, k.Value), "key given twice ("+twoPlaces(first, k)+")")
			}
			continue
		}
		seen[k.Value] = k
		d.pos.note(join(path, k.Value), k)
		*out = append(*out, pair{k.Value, v})
	}
	for _, m := range merges {
		m = resolve(m)
		var sources []*yaml.Node
		switch m.Kind {
		case yaml.MappingNode:
			sources = []*yaml.Node{m}
		case yaml.SequenceNode:
			sources = m.Content
		}
		if len(sources) == 0 && explicit {
			d.add(join(path, "<<"), "a merge key needs a mapping or a list of mappings, not "+describe(m))
		}
		for _, src := range sources {
			if src = resolve(src); src.Kind != yaml.MappingNode {
				if explicit {
					d.add(join(path, "<<"), "a merge key needs a mapping or a list of mappings, not a list holding "+describe(src))
				}
				continue
			}
			d.collect(src, path, out, seen, false, visited)
		}
	}
}

// twoPlaces says where two nodes are: "lines 3 and 5", or "line 3,
// columns 2 and 9".
func twoPlaces(a, b *yaml.Node) string {
	if a.Line == b.Line {
		return fmt.Sprintf("line %d, columns %d and %d", a.Line, a.Column, b.Column)
	}
	return fmt.Sprintf("lines %d and %d", a.Line, b.Line)
}

// field decodes the pair kv into the field of the struct v that has its key
// as yaml tag, or reports an unknown key.
func (d *decoder) field(kv pair, v reflect.Value, path string) {
	p := join(path, kv.key)
	t := v.Type()
	for i := range t.NumField() {
		if yamlKey(t.Field(i)) == kv.key {
			d.decode(kv.value, v.Field(i), p)
			return
		}
	}
	msg := "unknown key"
	if s := suggest(kv.key, structKeys(t)); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	d.add(p, msg)
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// A shorthand is a mapping that a file may also write as one scalar, such
// as an admin.stdio_commands entry: "npx" for {command: npx}.
type shorthand interface {
	setScalar(s string)
	forms() string // the two forms, for a problem
}

// decode decodes n into v (settable). A null value leaves v as it is, so
// "key:" with no value means the default.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.spend() {
		return
	}
	n = resolve(n)
	if isNull(n) {
		return
	}
	if sh, ok := v.Addr().Interface().(shorthand); ok && n.Kind != yaml.MappingNode {
		if n.Kind != yaml.ScalarNode {
			d.add(path, "must be "+sh.forms()+", not "+describe(n))
			return
		}
		sh.setScalar(n.Value)
		return
	}
	if v.Addr().Type().Implements(unmarshalerType) {
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.add(path, err.Error())
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		before := len(d.ps)
		d.decode(n, p.Elem(), path)
		if len(d.ps) == before {
			v.Set(p)
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.add(path, "must be a mapping of keys to values, not "+describe(n))
			return
		}
		for _, kv := range d.pairs(n, path) {
			d.field(kv, v, path)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.add(path, "must be a list, not "+describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		before := len(d.ps)
		for i, e := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			d.pos.note(p, e)
			d.decode(e, s.Index(i), p)
		}
		if len(d.ps) == before { // else keep the default, not a list with holes
			v.Set(s)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.add(path, "must be a mapping of names to values, not "+describe(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		before := len(d.ps)
		for _, kv := range d.pairs(n, path) {
			e := reflect.New(v.Type().Elem()).Elem()
			d.decode(kv.value, e, join(path, kv.key))
			m.SetMapIndex(reflect.ValueOf(kv.key), e)
		}
		if len(d.ps) == before {
			v.Set(m)
		}
	case reflect.String, reflect.Int, reflect.Bool, reflect.Float64:
		want := "a string"
		switch v.Kind() {
		case reflect.Int:
			want = "a whole number"
		case reflect.Float64:
			want = "a number"
		case reflect.Bool:
			want = "true or false"
		}
		if n.Kind != yaml.ScalarNode {
			d.add(path, "must be "+want+", not "+describe(n))
			return
		}
		if v.Kind() == reflect.String && n.ShortTag() != "!!binary" {
			v.SetString(n.Value) // as n.Decode would, only faster
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.add(path, "must be "+want+", not "+describe(n))
		}
	default:
		panic(fmt.Sprintf("config: no decoding for %s at %s", v.Type(), path)) // a field of a new type
	}
}

// ParseServer parses one server entry on its own, as the admin API
// receives it: a JSON (or YAML) object with the keys of a servers[] entry
// of the file. It is decoded, defaulted, expanded with lookupEnv and
// validated exactly like an entry of the file (global is the file's naming),
// and its problems' paths are the entry's own keys ("url",
// "env.TOKEN").
func ParseServer(data []byte, global Naming, lookupEnv func(string) (string, bool)) (Server, Problems) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	root, p := parseDocument(data)
	if p != nil {
		return Server{}, Problems{*p}
	}
	if root == nil {
		return Server{}, Problems{{Message: "empty entry; a server needs at least a name and a transport"}}
	}
	budget := maxValues
	d := &decoder{budget: &budget, pos: positions{}}
	s, ps := d.decodeServer(root, -1, global, lookupEnv)
	if budget < 0 {
		ps = append(ps, Problem{Message: fmt.Sprintf("the entry has more than %d values once its aliases are expanded", maxValues)})
	}
	return s, ps
}

// decodeServer decodes, expands and validates the i'th entry of servers,
// under the gateway's naming settings, over defaultServer. Its problems are
// not Fatal.
func (d *decoder) decodeServer(n *yaml.Node, i int, global Naming, lookupEnv func(string) (string, bool)) (Server, Problems) {
	s := DefaultServer()
	s.SessionMode = "" // setDefaults fills it, knowing the grant
	base := serverPath(i, "")
	sd := &decoder{budget: d.budget, pos: d.pos}
	if n = resolve(n); isNull(n) {
		sd.add(base, "empty entry; a server needs at least a name and a transport")
		return s, sd.ps
	}
	if n.Kind != yaml.MappingNode {
		sd.add(base, "must be a mapping (a server entry), not "+describe(n))
		return s, sd.ps
	}
	sv := reflect.ValueOf(&s).Elem()
	for _, kv := range sd.pairs(n, base) {
		sd.field(kv, sv, base)
	}
	s.setDefaults()

	// The name is known only now: put it into the paths of the problems so far.
	path := serverPath(i, s.Name)
	ps := sd.ps
	for j := range ps {
		ps[j].Path = path + strings.TrimPrefix(ps[j].Path, base)
		ps[j].Server = s.Name
	}

	unexpanded := map[string]bool{} // paths of the values expand failed on
	expand := func(key string, v *string) {
		out, errs := expand(*v, lookupEnv)
		for _, err := range errs {
			ps = append(ps, Problem{Path: key, Message: err.Error(), Server: s.Name})
			unexpanded[key] = true
		}
		*v = out
	}
	expand(join(path, "url"), &s.URL)
	expand(join(path, "api_key"), &s.APIKey)
	if s.OAuth != nil {
		expand(join(join(path, "oauth"), "client_secret"), &s.OAuth.ClientSecret)
	}
	for _, m := range []struct {
		key string
		m   map[string]string
	}{{"headers", s.Headers}, {"env", s.Env}} {
		for _, k := range sortedKeys(m.m) {
			v := m.m[k]
			expand(join(join(path, m.key), k), &v)
			m.m[k] = v
		}
	}
	// A value that did not expand is "" now: don't also call it missing.
	for _, p := range ValidateServer(&s, path, global) {
		if !unexpanded[p.Path] {
			ps = append(ps, p)
		}
	}
	// The positions were noted under the paths without the name.
	for j := range ps {
		if rest, ok := strings.CutPrefix(ps[j].Path, path); ok {
			d.pos.place(&ps[j], base+rest)
		}
	}
	return s, ps
}

// resolve follows an alias to the value it names.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" || n.Kind == 0
}

// yamlKey returns the key of a struct field: its yaml tag's name.
func yamlKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

func structKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if k := yamlKey(t.Field(i)); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

// suggest returns the key of keys that key is most likely a misspelling
// of, or "".
func suggest(key string, keys []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	best, bestDist := "", 0
	for _, k := range keys {
		if norm(k) == norm(key) {
			return k // Api-Key, apiKey, API_KEY
		}
		dist := levenshtein(key, k)
		if dist <= max(1, len(k)/3) && (best == "" || dist < bestDist) {
			best, bestDist = k, dist
		}
	}
	return best
}

// levenshtein is the edit distance between a and b, in bytes.
func levenshtein(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b)) // not a typo of a short key
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// join appends a key to a path: "sessions.max", "env.TOKEN", or
// env["odd key"] when the key is not letters, digits, "_" and "-".
func join(path, key string) string {
	if !simpleKey(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// simpleKey reports whether key can be written in a path without quotes.
func simpleKey(key string) bool {
	if key == "" {
		return false
	}
	for _, c := range []byte(key) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Expand expands ${VAR} and ${VAR:-default} in s: ${VAR} is the value of
// VAR, and an unset VAR is an error; ${VAR:-default} is the value of VAR,
// or default when VAR is unset or empty (${VAR:-} gives ""). The default is
// taken as written, up to the first "}". "$$" is a literal "$", and a "$"
// not followed by "{" or "$" is kept as it is. Names are letters, digits
// and "_", not starting with a digit. If lookupEnv is nil, no variable is
// set.
//
// The errors name variables, never values, which may be secrets. Every
// malformed or unset reference is reported (joined with errors.Join).
func Expand(s string, lookupEnv func(string) (string, bool)) (string, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	out, errs := expand(s, lookupEnv)
	return out, errors.Join(errs...)
}

// expand is Expand with each error apart. On error the result is "".
func expand(s string, lookupEnv func(string) (string, bool)) (string, []error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	var errs []error
	for i := 0; i < len(s); {
		if s[i] != '$' {
			j := strings.IndexByte(s[i:], '$')
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
			continue
		}
		if i+1 == len(s) || s[i+1] != '{' && s[i+1] != '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i += 2
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			errs = append(errs, fmt.Errorf("unterminated ${ at byte %d (write $$ for a literal $)", i))
			break
		}
		start := i
		name, def, hasDef := strings.Cut(s[i+2:i+2+end], ":-")
		i += 2 + end + 1
		if !ValidVarName(name) {
			errs = append(errs, fmt.Errorf("malformed ${...} at byte %d: a variable name is letters, digits and _, not starting with a digit (write $$ for a literal $)", start))
			continue
		}
		switch v, ok := lookupEnv(name); {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			errs = append(errs, fmt.Errorf("environment variable %s is not set (use ${%s:-default} for a default)", name, name))
		}
	}
	if len(errs) > 0 {
		return "", errs
	}
	return b.String(), nil
}

// ValidVarName reports whether s is an environment variable name as ${VAR}
// takes it: letters, digits and "_", not starting with a digit.
func ValidVarName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
