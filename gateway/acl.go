package gateway

import (
	"fmt"
	"path"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Access control (config.ACL). Every rule is checked:
//
//	applies to the caller?  Principals has Request.Principal, or Groups
//	                        shares one of Request.Groups (both empty:
//	                        everyone, anonymous included)
//	applies to the item?    Servers matches its server, or the patterns of
//	                        its kind (Tools, Prompts, Resources) match its
//	                        exposed name (a resource or template: one of
//	                        its forms, see resourceForms)
//
// A matching deny wins over a matching allow; with no match the default
// decides. The lists show a caller only what it may use (filtered while
// paging, the cursor staying the key of the last item returned: see
// coverage below); a call, get, read, subscribe or completion of anything
// else is CodeForbidden, naming the item, never the rule. Media URLs are
// not items: they carry their own owner check.
//
// The rules are compiled once, in New. With no rules and default allow
// there is no acl at all (nil), and the lists are the precomputed ones.

// itemKind is the kind of item an access rule is asked about.
type itemKind uint8

const (
	kindTool itemKind = iota
	kindPrompt
	kindResource // a resource or a resource template
	numKinds
)

func (k itemKind) String() string {
	switch k {
	case kindTool:
		return "tool"
	case kindPrompt:
		return "prompt"
	}
	return "resource"
}

// acl is a compiled config.ACL. The nil *acl allows everything.
type acl struct {
	rules        []aclRule
	defaultAllow bool
}

// aclRule is a compiled config.ACLRule.
type aclRule struct {
	deny       bool
	principals []string
	groups     []string
	servers    []glob
	names      [numKinds][]glob // by itemKind
}

// compileACL compiles c, or returns nil when it allows everything (no
// rules, default allow). It checks what config.Validate checks, so that a
// config that skipped validation cannot mean something else here.
func compileACL(c config.ACL) (*acl, error) {
	def := c.DefaultEffect()
	if def != config.ACLAllow && def != config.ACLDeny {
		return nil, fmt.Errorf("acl.default: %q is not allow or deny", c.Default)
	}
	if len(c.Rules) == 0 && def == config.ACLAllow {
		return nil, nil
	}
	a := &acl{rules: make([]aclRule, 0, len(c.Rules)), defaultAllow: def == config.ACLAllow}
	for i, r := range c.Rules {
		if r.Effect != config.ACLAllow && r.Effect != config.ACLDeny {
			return nil, fmt.Errorf("acl.rules[%d].effect: %q is not allow or deny", i, r.Effect)
		}
		cr := aclRule{
			deny:       r.Effect == config.ACLDeny,
			principals: append([]string(nil), r.Principals...),
			groups:     append([]string(nil), r.Groups...),
		}
		for _, f := range []struct {
			key  string
			pats []string
			dst  *[]glob
		}{
			{"servers", r.Servers, &cr.servers},
			{"tools", r.Tools, &cr.names[kindTool]},
			{"prompts", r.Prompts, &cr.names[kindPrompt]},
			{"resources", r.Resources, &cr.names[kindResource]},
		} {
			gs, err := compileGlobs(f.pats)
			if err != nil {
				return nil, fmt.Errorf("acl.rules[%d].%s: %w", i, f.key, err)
			}
			*f.dst = gs
		}
		cr.names[kindResource] = uriGlobs(cr.names[kindResource], cr.deny)
		a.rules = append(a.rules, cr)
	}
	return a, nil
}

// allows reports whether the caller (principal, groups) may use the tool
// or prompt (kind) named name (its exposed name) on server. It allocates
// nothing.
func (a *acl) allows(principal string, groups []string, kind itemKind, server, name string) bool {
	if a == nil {
		return true
	}
	if principal == "" {
		principal = Anonymous
	}
	allowed := false
	for i := range a.rules {
		r := &a.rules[i]
		if !r.appliesTo(principal, groups) || !r.covers(kind, server, name) {
			continue
		}
		if r.deny {
			return false
		}
		allowed = true
	}
	return allowed || a.defaultAllow
}

// Resources. A resource (or template) has several spellings, and a rule
// written for one must hold for the others, so that a client cannot
// reach a denied resource by one the rule did not foresee, and a rule
// holds whichever form the server is listed under. A rule's resource
// patterns are matched against, each bare and in the namespaced form
// mcp+<server>+<uri>:
//
//	normalizeURI of the server's URI   by every rule
//	the server's own spelling          by deny rules only
//	aclKey of it (repeated and         by deny rules only
//	trailing slashes dropped)
//
// The normalized URI names the same resource as the URI forwarded (the
// server's own spelling, or the normalized URI: resources.go) on every
// server, so an allow rule grants nothing more through it. The others
// may name another resource (a//b on a server that tells it from a/b, a
// server's listed ../ spelling), so only a deny is widened to them. A
// server's own URI that reads as namespaced (mcp+notes+x listed by files)
// would, bare, match the rules written for another server's: only a deny
// sees it bare. A URI the client makes up cannot reach a path other than
// the one the rules were matched against: one a server could decode into
// another path (%2F, %5C, dot segments encoded twice) is refused before
// any rule is asked (unsafeURI). The gateway cannot know a server's own
// aliases (a case-insensitive path, a symlink, a URI it lists with %2F in
// it): a deny rule does not see them, which is why allow rules are the
// safe form for resources. Literal patterns are normalized when the rules
// are compiled (uriGlobs), so that FILE:///a written in a rule matches
// file:///a.

// resourceForms are the forms of one server's resource or template that
// a rule's resource patterns are matched against.
type resourceForms struct {
	all [2]string // normalized, bare and namespaced: every rule
	// own and aclKey's, bare and namespaced, and the normalized bare
	// form, which all lacks for a look-alike: deny rules too
	deny [5]string
}

// formsOf returns the forms of server's resource own (the URI it is read
// under upstream, or a template), prefix being that of namespaced URIs.
func formsOf(prefix, server, own string) *resourceForms {
	norm, key := normalizeURI(own), aclKey(own)
	ns := normalizeURI(namespacedURI(prefix, server, own))
	f := &resourceForms{
		all:  [2]string{norm, ns},
		deny: [5]string{own, namespacedURI(prefix, server, own), key, namespacedURI(prefix, server, key), norm},
	}
	if _, _, ok := splitNamespaced(prefix, own); ok {
		f.all[0] = ns // bare, it reads as another server's
	}
	return f
}

// allowsResource reports whether the caller may use server's resource
// or template of forms f.
func (a *acl) allowsResource(principal string, groups []string, server string, f *resourceForms) bool {
	if a == nil {
		return true
	}
	if principal == "" {
		principal = Anonymous
	}
	allowed := false
	for i := range a.rules {
		r := &a.rules[i]
		if !r.appliesTo(principal, groups) || !r.coversResource(server, f) {
			continue
		}
		if r.deny {
			return false
		}
		allowed = true
	}
	return allowed || a.defaultAllow
}

// coversResource reports whether r applies to server's resource of
// forms f.
func (r *aclRule) coversResource(server string, f *resourceForms) bool {
	for i := range r.servers {
		if r.servers[i].match(server) {
			return true
		}
	}
	pats := r.names[kindResource]
	for i := range pats {
		for _, s := range f.all {
			if pats[i].match(s) {
				return true
			}
		}
		if r.deny {
			for _, s := range f.deny {
				if pats[i].match(s) {
					return true
				}
			}
		}
	}
	return false
}

// uriGlobs returns a rule's resource patterns with each literal one (no
// glob metacharacters) normalized, and for a deny rule its aclKey's form
// added, so that a rule spelled another way than the URI still matches
// it. A pattern with metacharacters is kept as written: normalizing it
// could change what it matches (removing "/.." from "file:///a/..*").
func uriGlobs(gs []glob, deny bool) []glob {
	out := gs[:len(gs):len(gs)]
	for i, g := range gs {
		if g.form != globLiteral {
			continue
		}
		out[i].pat = normalizeURI(g.pat)
		if key := aclKey(g.pat); deny && key != out[i].pat {
			out = append(out, glob{form: globLiteral, pat: key})
		}
	}
	return out
}

// Lists. Whether a rule covers an item does not depend on the caller, so
// each list works it out once for all its items (coverage, at the first
// list for a caller with rules, the list being immutable); a caller's list
// is then the items whose covering rules, among those that apply to the
// caller (forCaller), include an allow and no deny: a few word operations
// per item, whatever the patterns.

// callerRules are the rules that apply to one caller, as bit masks over
// the rule numbers.
type callerRules struct {
	allow, deny  []uint64
	defaultAllow bool
}

// words returns the number of uint64s of a mask over a's rules.
func (a *acl) words() int { return (len(a.rules) + 63) / 64 }

// forCaller returns the rules that apply to a caller, or nil when they
// allow it everything (no rule applies, default allow).
func (a *acl) forCaller(principal string, groups []string) *callerRules {
	if a == nil {
		return nil
	}
	if principal == "" {
		principal = Anonymous
	}
	c := &callerRules{defaultAllow: a.defaultAllow}
	masks := make([]uint64, 2*a.words())
	c.allow, c.deny = masks[:a.words()], masks[a.words():]
	applies := false
	for i := range a.rules {
		r := &a.rules[i]
		if !r.appliesTo(principal, groups) {
			continue
		}
		applies = true
		if r.deny {
			c.deny[i/64] |= 1 << (i % 64)
		} else {
			c.allow[i/64] |= 1 << (i % 64)
		}
	}
	if !applies && a.defaultAllow {
		return nil
	}
	return c
}

// allowsCovered reports whether c allows an item that the rules of cov
// (its coverage) cover.
func (c *callerRules) allowsCovered(cov []uint64) bool {
	allowed := false
	for w, bits := range cov {
		if bits&c.deny[w] != 0 {
			return false
		}
		if bits&c.allow[w] != 0 {
			allowed = true
		}
	}
	return allowed || c.defaultAllow
}

// listCoverage is the coverage of a list's items: the rules that cover
// item i are the bits of bits[i*words : (i+1)*words].
type listCoverage struct {
	once  sync.Once
	words int
	bits  []uint64
}

// coverage returns the coverage of l's items, of kind, working it out on
// the first call; prefix is that of namespaced URIs.
func (a *acl) coverage(l *list, kind itemKind, prefix string) *listCoverage {
	lc := &l.coverage
	lc.once.Do(func() {
		lc.words = a.words()
		lc.bits = make([]uint64, len(l.items)*lc.words)
		for i := range l.items {
			it := &l.items[i]
			var forms *resourceForms
			if kind == kindResource {
				forms = formsOf(prefix, it.server, it.uri)
			}
			cov := lc.bits[i*lc.words : (i+1)*lc.words]
			for j := range a.rules {
				r := &a.rules[j]
				if forms != nil && r.coversResource(it.server, forms) || forms == nil && r.covers(kind, it.server, it.key) {
					cov[j/64] |= 1 << (j % 64)
				}
			}
		}
	})
	return lc
}

// of returns the coverage of item i.
func (lc *listCoverage) of(i int) []uint64 {
	return lc.bits[i*lc.words : (i+1)*lc.words]
}

// appliesTo reports whether r applies to the caller.
func (r *aclRule) appliesTo(principal string, groups []string) bool {
	if len(r.principals) == 0 && len(r.groups) == 0 {
		return true
	}
	for _, p := range r.principals {
		if p == principal {
			return true
		}
	}
	for _, g := range r.groups {
		for _, h := range groups {
			if g == h {
				return true
			}
		}
	}
	return false
}

// covers reports whether r applies to the item.
func (r *aclRule) covers(kind itemKind, server, name string) bool {
	for i := range r.servers {
		if r.servers[i].match(server) {
			return true
		}
	}
	pats := r.names[kind]
	for i := range pats {
		if pats[i].match(name) {
			return true
		}
	}
	return false
}

// forbidden is the error of a call of an item the caller may not use. It
// names the item, not the rule that forbade it.
func forbidden(kind itemKind, name, server string) *jsonrpc.Error {
	return jsonrpc.NewError(CodeForbidden,
		fmt.Sprintf("%s %q is not allowed for this caller; ask the gateway's operator for access", kind, name),
		errorData{Server: server})
}

// mayUseResource reports whether req's caller may use server's resource
// or template orig (the server's own URI, as forwarded to it), checked
// under its forms (resourceForms).
func (s *Server) mayUseResource(cat *catalog, req *Request, server, orig string) bool {
	if s.acl == nil {
		return true
	}
	return s.acl.allowsResource(req.Principal, req.Groups, server, formsOf(cat.prefix, server, orig))
}

// glob is a compiled pattern in path.Match's syntax (* ? [a-z] [^a-z] and
// \ escapes), except that * and ? match "/" too: resource URIs are full
// of slashes, and "*" must mean everything, "file:///docs/*" every
// resource under file:///docs/.
type glob struct {
	form globForm
	pat  string // the pattern; for globPrefix, the part before the *
}

type globForm uint8

const (
	globAny     globForm = iota // "*"
	globLiteral                 // no metacharacters
	globPrefix                  // a literal followed by one "*"
	globGeneral
)

func compileGlobs(pats []string) ([]glob, error) {
	if len(pats) == 0 {
		return nil, nil
	}
	out := make([]glob, len(pats))
	for i, p := range pats {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return nil, fmt.Errorf("%q is not a valid glob pattern", p)
		}
		out[i] = compileGlob(p)
	}
	return out, nil
}

func compileGlob(p string) glob {
	const meta = `*?[\`
	switch i := strings.IndexAny(p, meta); {
	case p == "*":
		return glob{form: globAny}
	case i < 0:
		return glob{form: globLiteral, pat: p}
	case i == len(p)-1 && p[i] == '*':
		return glob{form: globPrefix, pat: p[:i]}
	}
	return glob{form: globGeneral, pat: p}
}

// match reports whether s matches g.
func (g *glob) match(s string) bool {
	switch g.form {
	case globAny:
		return true
	case globLiteral:
		return s == g.pat
	case globPrefix:
		return strings.HasPrefix(s, g.pat)
	}
	return matchGlob(g.pat, s)
}

// matchGlob matches s against p. A * matches any run of bytes; on a
// mismatch it takes one more byte of s and the rest of p is tried
// again (the last * is the only one to go back to: ? and classes match
// exactly one character). A malformed class matches nothing.
func matchGlob(p, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, 0
	for px < len(p) || sx < len(s) {
		if px < len(p) {
			switch c := p[px]; c {
			case '*':
				starPx, starSx = px, sx
				px++
				continue
			case '?':
				if sx < len(s) {
					_, w := utf8.DecodeRuneInString(s[sx:])
					px, sx = px+1, sx+w
					continue
				}
			case '[':
				if sx < len(s) {
					r, w := utf8.DecodeRuneInString(s[sx:])
					if ok, n := matchClass(p[px:], r); ok {
						px, sx = px+n, sx+w
						continue
					}
				}
			case '\\':
				if px+1 < len(p) && sx < len(s) && p[px+1] == s[sx] {
					px, sx = px+2, sx+1
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px, sx = px+1, sx+1
					continue
				}
			}
		}
		if starPx >= 0 && starSx < len(s) {
			// One byte, as path.Match does: a * that stops inside a
			// character leaves the rest to fail on its own.
			starSx++
			px, sx = starPx+1, starSx
			continue
		}
		return false
	}
	return true
}

// matchClass matches r against the class at the start of p (p[0] is
// '['), returning whether it matched and the class's length in p.
func matchClass(p string, r rune) (bool, int) {
	i := 1
	negate := i < len(p) && p[i] == '^'
	if negate {
		i++
	}
	matched := false
	for n := 0; ; n++ {
		if i >= len(p) {
			return false, 0
		}
		if p[i] == ']' && n > 0 {
			i++
			break
		}
		lo, w := classChar(p[i:])
		if w == 0 {
			return false, 0
		}
		i += w
		hi := lo
		if i < len(p) && p[i] == '-' {
			if hi, w = classChar(p[i+1:]); w == 0 {
				return false, 0
			}
			i += 1 + w
		}
		if lo <= r && r <= hi {
			matched = true
		}
	}
	return matched != negate, i
}

// classChar returns the character at the start of p inside a class (maybe
// escaped) and its length in p; 0 when there is none.
func classChar(p string) (rune, int) {
	if len(p) == 0 || p[0] == '-' || p[0] == ']' {
		return 0, 0
	}
	esc := 0
	if p[0] == '\\' {
		if esc, p = 1, p[1:]; len(p) == 0 {
			return 0, 0
		}
	}
	r, w := utf8.DecodeRuneInString(p)
	return r, esc + w
}
