// Package charttest renders the mcpgw chart (charts/mcpgw) in-process with
// Helm's Go packages, lints it, and strictly decodes every rendered
// manifest into its Kubernetes API type: an unknown or misspelled field
// fails. It is its own module so that Helm's and Kubernetes' dependencies
// stay out of the gateway's go.mod.
package charttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../mcpgw"

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the
// chart writes. The Prometheus Operator's Go module is large, so this
// minimal type stands in for it; decoding is strict all the same.
type serviceMonitor struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   metav1ObjectMeta   `json:"metadata"`
	Spec       serviceMonitorSpec `json:"spec"`
}

type metav1ObjectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

type serviceMonitorSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Endpoints []struct {
		Port          string `json:"port"`
		Path          string `json:"path"`
		Interval      string `json:"interval"`
		ScrapeTimeout string `json:"scrapeTimeout"`
	} `json:"endpoints"`
}

// newObject returns the Go type a rendered apiVersion/kind decodes into.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, true
	case "networking.k8s.io/v1 Ingress":
		return &networkingv1.Ingress{}, true
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &serviceMonitor{}, true
	}
	return nil, false
}

// render runs `helm template` in-process with the values of file ("" for
// the chart's defaults) and extra (set on top).
func render(t *testing.T, file string, extra map[string]any) (string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	vals := map[string]any{}
	if file != "" {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatalf("read %s: %v", file, err)
		}
		vals = v
	}
	vals = chartutil.CoalesceTables(extra, vals)
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = "mcpgw"
	install.Namespace = "mcp"
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decodeAll strictly decodes every manifest, keyed by "Kind/name".
func decodeAll(t *testing.T, manifest string) map[string]any {
	t.Helper()
	objs := map[string]any{}
	for _, doc := range docSep.Split(manifest, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			t.Errorf("not YAML (or a duplicate key): %v\n%s", err, doc)
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			t.Errorf("no apiVersion/kind: %v\n%s", err, doc)
			continue
		}
		obj, ok := newObject(head.APIVersion, head.Kind)
		if !ok {
			t.Errorf("%s %s: no Go type known for it in this test", head.APIVersion, head.Kind)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			t.Errorf("%s %s/%s does not decode strictly: %v\n%s", head.APIVersion, head.Kind, head.Metadata.Name, err, doc)
			continue
		}
		key := head.Kind + "/" + head.Metadata.Name
		if _, dup := objs[key]; dup {
			t.Errorf("%s rendered twice", key)
		}
		objs[key] = obj
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestLint(t *testing.T) {
	for _, file := range []string{"", "ci/full-values.yaml", "ci/postgres-values.yaml"} {
		t.Run("values="+file, func(t *testing.T) {
			vals := map[string]any{}
			if file != "" {
				v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, file))
				if err != nil {
					t.Fatal(err)
				}
				vals = v
			}
			linter := lint.All(chartDir, vals, "mcp", false)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
		})
	}
}

// gatewayConfig reads mcpgw.yaml out of the rendered ConfigMap or Secret.
func gatewayConfig(t *testing.T, objs map[string]any) map[string]any {
	t.Helper()
	var text string
	if cm, ok := objs["ConfigMap/mcpgw-config"].(*corev1.ConfigMap); ok {
		text = cm.Data["mcpgw.yaml"]
	} else if s, ok := objs["Secret/mcpgw-config"].(*corev1.Secret); ok {
		text = s.StringData["mcpgw.yaml"]
	} else {
		t.Fatal("neither ConfigMap/mcpgw-config nor Secret/mcpgw-config rendered")
	}
	cfg := map[string]any{}
	if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
		t.Fatalf("mcpgw.yaml: %v\n%s", err, text)
	}
	return cfg
}

// binDir holds what the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpgw-chart-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// mcpgwBinary builds, once, the gateway of this repository.
var mcpgwBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "mcpgw")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mcpgw")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building mcpgw: %v\n%s", err, out)
	}
	return bin, nil
})

// validateConfig runs `mcpgw validate` on the config the chart rendered,
// with the secret and env (NAME=value) in its environment, as the pod has
// them.
func validateConfig(t *testing.T, objs map[string]any, env ...string) {
	t.Helper()
	bin, err := mcpgwBinary()
	if err != nil {
		t.Fatal(err)
	}
	var text string
	if cm, ok := objs["ConfigMap/mcpgw-config"].(*corev1.ConfigMap); ok {
		text = cm.Data["mcpgw.yaml"]
	} else if s, ok := objs["Secret/mcpgw-config"].(*corev1.Secret); ok {
		text = s.StringData["mcpgw.yaml"]
	}
	path := filepath.Join(t.TempDir(), "mcpgw.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "validate", "--config", path)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MCPGW_SECRET=" + strings.Repeat("k", 44)}, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("mcpgw validate of the rendered config: %v\n%s\n%s", err, out, text)
	}
}

func checkPod(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext does not run as non-root: %+v", psc)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("container has no securityContext")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem is not read-only")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation is allowed")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("capabilities: %+v, want drop [ALL]", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccompProfile: %+v", sc.SeccompProfile)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe: %+v", c.LivenessProbe)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe: %+v", c.ReadinessProbe)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources: %+v", c.Resources)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	for _, p := range []string{"/etc/mcpgw", "/data", "/home/mcpgw", "/tmp"} {
		if mounts[p] == "" {
			t.Errorf("nothing mounted at %s", p)
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	for _, n := range []string{"home", "tmp"} {
		if vols[n].EmptyDir == nil {
			t.Errorf("volume %s is not an emptyDir", n)
		}
	}
}

func TestDefaultValues(t *testing.T) {
	manifest, err := render(t, "", nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs := decodeAll(t, manifest)
	for _, want := range []string{"Deployment/mcpgw", "Service/mcpgw", "ServiceAccount/mcpgw", "ConfigMap/mcpgw-config"} {
		if objs[want] == nil {
			t.Errorf("%s not rendered", want)
		}
	}
	for key := range objs {
		switch strings.Split(key, "/")[0] {
		case "Ingress", "PersistentVolumeClaim", "Secret", "ServiceMonitor", "NetworkPolicy", "HorizontalPodAutoscaler", "PodDisruptionBudget":
			t.Errorf("%s rendered with default values", key)
		}
	}
	d := objs["Deployment/mcpgw"].(*appsv1.Deployment)
	checkPod(t, d)
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas %d", *d.Spec.Replicas)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "data" && v.EmptyDir == nil {
			t.Errorf("data is not an emptyDir without persistence: %+v", v)
		}
	}
	cfg := gatewayConfig(t, objs)
	if cfg["listen"] != "0.0.0.0:8080" || cfg["data_dir"] != "/data" {
		t.Errorf("config listen=%v data_dir=%v", cfg["listen"], cfg["data_dir"])
	}
	if _, ok := cfg["public_url"]; ok {
		t.Errorf("public_url %v set without an ingress", cfg["public_url"])
	}
	validateConfig(t, objs)
}

func TestFullValues(t *testing.T) {
	manifest, err := render(t, "ci/full-values.yaml", nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs := decodeAll(t, manifest)
	for _, want := range []string{
		"Deployment/mcpgw", "Service/mcpgw", "ServiceAccount/mcpgw", "Secret/mcpgw-config", "Secret/mcpgw",
		"PersistentVolumeClaim/mcpgw-data", "Ingress/mcpgw", "ServiceMonitor/mcpgw", "NetworkPolicy/mcpgw",
	} {
		if objs[want] == nil {
			t.Errorf("%s not rendered", want)
		}
	}
	if objs["ConfigMap/mcpgw-config"] != nil {
		t.Error("the config holds token hashes but went to a ConfigMap")
	}
	d := objs["Deployment/mcpgw"].(*appsv1.Deployment)
	checkPod(t, d)
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %q with a ReadWriteOnce volume, want Recreate", d.Spec.Strategy.Type)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "mcpgw" {
		t.Errorf("envFrom %+v, want the Secret mcpgw", c.EnvFrom)
	}
	if s := objs["Secret/mcpgw"].(*corev1.Secret); s.StringData["MCPGW_SECRET"] == "" || s.StringData["SEARCH_API_KEY"] == "" {
		t.Errorf("Secret mcpgw keys: %v", s.StringData)
	}

	ing := objs["Ingress/mcpgw"].(*networkingv1.Ingress)
	for k, v := range map[string]string{
		"nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
		"nginx.ingress.kubernetes.io/proxy-send-timeout": "3600",
		"nginx.ingress.kubernetes.io/proxy-buffering":    "off",
		"nginx.ingress.kubernetes.io/proxy-body-size":    "8m",
		"cert-manager.io/cluster-issuer":                 "letsencrypt",
	} {
		if got := ing.Annotations[k]; got != v {
			t.Errorf("ingress annotation %s = %q, want %q", k, got, v)
		}
	}
	if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "mcpgw-tls" || len(ing.Spec.TLS[0].Hosts) != 2 {
		t.Errorf("ingress tls: %+v", ing.Spec.TLS)
	}
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
		t.Errorf("ingressClassName %v", ing.Spec.IngressClassName)
	}
	// Clients' paths only: /admin and /metrics stay inside the cluster.
	for _, rule := range ing.Spec.Rules {
		var paths []string
		for _, p := range rule.HTTP.Paths {
			paths = append(paths, p.Path)
		}
		if strings.Join(paths, " ") != "/mcp /media /.well-known" {
			t.Errorf("ingress paths of %s: %v, want /mcp /media /.well-known", rule.Host, paths)
		}
	}

	pvc := objs["PersistentVolumeClaim/mcpgw-data"].(*corev1.PersistentVolumeClaim)
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "standard" || pvc.Spec.Resources.Requests.Storage().String() != "5Gi" {
		t.Errorf("pvc spec: %+v", pvc.Spec)
	}

	cfg := gatewayConfig(t, objs)
	if cfg["public_url"] != "https://mcp.example.com" {
		t.Errorf("public_url %v, want https://mcp.example.com", cfg["public_url"])
	}
	if cfg["secret"] != "${MCPGW_SECRET:-}" || cfg["shutdown_grace"] != "20s" {
		t.Errorf("config secret=%v shutdown_grace=%v", cfg["secret"], cfg["shutdown_grace"])
	}
	admin, _ := cfg["admin"].(map[string]any)
	auth, _ := cfg["auth"].(map[string]any)
	if admin == nil || len(admin["tokens"].([]any)) != 1 || auth == nil || len(auth["api_keys"].([]any)) != 1 {
		t.Errorf("admin %v, auth %v: want the hashes from secrets", admin, auth)
	}
	if servers, _ := cfg["servers"].([]any); len(servers) != 2 {
		t.Errorf("servers %v", cfg["servers"])
	}
}

// postgres is the least a PostgreSQL release needs, for tests to add to.
func postgres(store map[string]any) map[string]any {
	st := map[string]any{"driver": "postgres", "existingSecret": "pg"}
	for k, v := range store {
		st[k] = v
	}
	return map[string]any{"store": st}
}

// with returns a copy of base with the keys of more set on top.
func with(base map[string]any, more map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// TestRefused checks the combinations that cannot work fail at render
// time, saying why and what to do instead.
func TestRefused(t *testing.T) {
	rwo := map[string]any{"enabled": true, "accessMode": "ReadWriteOnce"}
	rwx := map[string]any{"enabled": true, "accessMode": "ReadWriteMany"}
	tests := []struct {
		name  string
		extra map[string]any
		want  string
	}{
		// SQLite: one pod only.
		{"two replicas", map[string]any{"replicaCount": 2}, "replicaCount is 2, but must be 1 with store.driver sqlite: SQLite under data_dir cannot be shared by two pods; set store.driver: postgres"},
		{"HPA", map[string]any{"autoscaling": map[string]any{"enabled": true}}, "autoscaling.enabled must be false with store.driver sqlite: an HPA would run more than one replica, and SQLite under data_dir cannot be shared by two pods; set store.driver: postgres"},
		{"PDB", map[string]any{"podDisruptionBudget": map[string]any{"enabled": true}}, "podDisruptionBudget.enabled must be false with store.driver sqlite: with one replica a PDB only blocks node drains; set store.driver: postgres"},
		{"dsn with sqlite", map[string]any{"store": map[string]any{"dsn": "postgres://db/mcpgw"}}, "store.dsn is set, but store.driver is sqlite: set store.driver: postgres, or leave store.dsn empty"},
		{"existingSecret with sqlite", map[string]any{"store": map[string]any{"existingSecret": "pg"}}, "store.existingSecret is set, but store.driver is sqlite: set store.driver: postgres, or leave store.existingSecret empty"},
		{"maxConns with sqlite", map[string]any{"store": map[string]any{"maxConns": 5}}, "store.maxConns is set, but store.driver is sqlite: set store.driver: postgres, or leave store.maxConns 0"},
		{"a driver typo", map[string]any{"store": map[string]any{"driver": "postgresql"}}, "/store/driver"},
		{"a typo in store", map[string]any{"store": map[string]any{"url": "x"}}, "additional properties 'url' not allowed"},

		// PostgreSQL.
		{"postgres without a DSN", map[string]any{"store": map[string]any{"driver": "postgres"}}, "store.driver postgres needs the database's URL: store.dsn, or store.existingSecret (and store.existingSecretKey)"},
		{"dsn and existingSecret", postgres(map[string]any{"dsn": "postgres://db/mcpgw"}), "/store/dsn"},
		{"an empty existingSecretKey", postgres(map[string]any{"existingSecretKey": ""}), "/store/existingSecretKey"},
		{"negative maxConns", postgres(map[string]any{"maxConns": -1}), "/store/maxConns"},
		{"RWO volume, replicas", with(postgres(nil), map[string]any{"replicaCount": 2, "persistence": rwo}),
			"persistence.enabled must be false with more than one replica: a ReadWriteOnce volume cannot be attached to pods on different nodes"},
		{"RWO volume, HPA", with(postgres(nil), map[string]any{"autoscaling": map[string]any{"enabled": true, "minReplicas": 2}, "persistence": rwo}),
			"persistence.enabled must be false with more than one replica"},
		{"RWX volume, replicas", with(postgres(nil), map[string]any{"replicaCount": 3, "persistence": rwx}),
			"persistence.enabled must be false with more than one replica: each replica rotates the servers' log files and trims the media store under data_dir by itself"},
		{"HPA min above max", with(postgres(nil), map[string]any{"autoscaling": map[string]any{"enabled": true, "minReplicas": 4, "maxReplicas": 3}}),
			"autoscaling.minReplicas (4) is above autoscaling.maxReplicas (3)"},
		{"PDB blocking drains", with(postgres(nil), map[string]any{"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": 1}}),
			"podDisruptionBudget.minAvailable is 1, but only 1 replica is guaranteed: the PDB would block every node drain"},
		{"PDB blocking drains with an HPA", with(postgres(nil), map[string]any{"autoscaling": map[string]any{"enabled": true, "minReplicas": 2}, "podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": 2}}),
			"podDisruptionBudget.minAvailable is 2, but only 2 replicas are guaranteed"},
		{"replicas without a signing key", with(postgres(nil), map[string]any{"replicaCount": 2}),
			"secrets.signingKey (or MCPGW_SECRET in secrets.existingSecret) is needed with more than one replica: each replica would pick its own random key"},
		{"HPA without a signing key", with(postgres(nil), map[string]any{"autoscaling": map[string]any{"enabled": true}}),
			"secrets.signingKey (or MCPGW_SECRET in secrets.existingSecret) is needed with more than one replica"},
		{"config.store.dsn", with(postgres(nil), map[string]any{"config": map[string]any{"store": map[string]any{"dsn": "postgres://u:p@db/x"}}}),
			"config.store.dsn is set: use the chart's store values"},
		{"config.store.driver", map[string]any{"config": map[string]any{"store": map[string]any{"driver": "postgres"}}},
			"config.store.driver is set: use the chart's store values"},
		{"config.cluster.self_url", with(postgres(nil), map[string]any{"config": map[string]any{"cluster": map[string]any{"self_url": "http://x"}}}),
			"config.cluster.self_url is set: the chart renders it from the pod's IP"},
		{"extraEnv MCPGW_DATABASE_URL", with(postgres(nil), map[string]any{"extraEnv": []any{map[string]any{"name": "MCPGW_DATABASE_URL", "value": "x"}}}),
			"extraEnv sets MCPGW_DATABASE_URL, which the chart sets"},
		{"extraEnv MCPGW_POD_IP", with(postgres(nil), map[string]any{"extraEnv": []any{map[string]any{"name": "MCPGW_POD_IP", "value": "x"}}}),
			"extraEnv sets MCPGW_POD_IP, which the chart sets"},

		{"existingSecret and signingKey", map[string]any{"secrets": map[string]any{"existingSecret": "mine", "signingKey": "x"}}, "secrets.existingSecret is set"},
		{"ingress without hosts", map[string]any{"ingress": map[string]any{"enabled": true}}, "ingress.enabled needs ingress.hosts"},
		{"a typo in values", map[string]any{"replicas": 1}, "additional properties 'replicas' not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, "", tt.extra)
			if err == nil {
				t.Fatalf("rendered; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestExistingSecret(t *testing.T) {
	manifest, err := render(t, "", map[string]any{"secrets": map[string]any{"existingSecret": "mcpgw-keys"}})
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, manifest)
	if objs["Secret/mcpgw"] != nil {
		t.Error("a Secret rendered beside existingSecret")
	}
	c := objs["Deployment/mcpgw"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
	if got := fmt.Sprint(c.EnvFrom); !strings.Contains(got, "mcpgw-keys") {
		t.Errorf("envFrom %s, want the Secret mcpgw-keys", got)
	}
}

// envOf returns the container's variable name, nil if it is not set.
func envOf(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// TestSQLiteUnchanged checks the default SQLite release renders none of
// the PostgreSQL release's parts: its config stays what a gateway without
// a store section accepts.
func TestSQLiteUnchanged(t *testing.T) {
	manifest, err := render(t, "", nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs := decodeAll(t, manifest)
	for key := range objs {
		if key == "Secret/mcpgw-database" || key == "Service/mcpgw-headless" {
			t.Errorf("%s rendered with store.driver sqlite", key)
		}
	}
	cfg := gatewayConfig(t, objs)
	for _, k := range []string{"store", "cluster"} {
		if v, ok := cfg[k]; ok {
			t.Errorf("config %s = %v with store.driver sqlite", k, v)
		}
	}
	c := objs["Deployment/mcpgw"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
	for _, n := range []string{"MCPGW_DATABASE_URL", "MCPGW_POD_IP"} {
		if e := envOf(c, n); e != nil {
			t.Errorf("env %s set with store.driver sqlite: %+v", n, e)
		}
	}
}

// TestPostgresValues renders ci/postgres-values.yaml: three replicas
// sharing PostgreSQL, scaled by an HPA, guarded by a PDB, the DSN from a
// Secret the user manages.
func TestPostgresValues(t *testing.T) {
	manifest, err := render(t, "ci/postgres-values.yaml", nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs := decodeAll(t, manifest)
	for _, want := range []string{
		"Deployment/mcpgw", "Service/mcpgw", "ConfigMap/mcpgw-config",
		"HorizontalPodAutoscaler/mcpgw", "PodDisruptionBudget/mcpgw", "Ingress/mcpgw", "NetworkPolicy/mcpgw",
	} {
		if objs[want] == nil {
			t.Errorf("%s not rendered", want)
		}
	}
	for key := range objs {
		switch {
		case strings.HasPrefix(key, "PersistentVolumeClaim/"):
			t.Errorf("%s rendered: data_dir is an emptyDir with replicas", key)
		case key == "Secret/mcpgw-database":
			t.Errorf("%s rendered beside store.existingSecret", key)
		}
	}
	d := objs["Deployment/mcpgw"].(*appsv1.Deployment)
	checkPod(t, d)
	// The HPA owns the replica count: a Deployment that named one would
	// reset it at every upgrade.
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d beside an HPA, want none", *d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("strategy %q, want RollingUpdate", d.Spec.Strategy.Type)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "data" && v.EmptyDir == nil {
			t.Errorf("data is not an emptyDir: %+v", v)
		}
	}
	c := d.Spec.Template.Spec.Containers[0]
	db := envOf(c, "MCPGW_DATABASE_URL")
	if db == nil || db.ValueFrom == nil || db.ValueFrom.SecretKeyRef == nil ||
		db.ValueFrom.SecretKeyRef.Name != "mcpgw-postgres-app" || db.ValueFrom.SecretKeyRef.Key != "uri" {
		t.Errorf("env MCPGW_DATABASE_URL %+v, want key uri of Secret mcpgw-postgres-app", db)
	}

	hpa := objs["HorizontalPodAutoscaler/mcpgw"].(*autoscalingv2.HorizontalPodAutoscaler)
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 6 || hpa.Spec.ScaleTargetRef.Name != "mcpgw" {
		t.Errorf("hpa spec %+v, want 3..6 replicas of mcpgw", hpa.Spec)
	}
	pdb := objs["PodDisruptionBudget/mcpgw"].(*policyv1.PodDisruptionBudget)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("pdb minAvailable %v, want 2", pdb.Spec.MinAvailable)
	}

	ip := envOf(c, "MCPGW_POD_IP")
	if ip == nil || ip.ValueFrom == nil || ip.ValueFrom.FieldRef == nil || ip.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env MCPGW_POD_IP %+v, want the downward API's status.podIP", ip)
	}

	hl, _ := objs["Service/mcpgw-headless"].(*corev1.Service)
	switch {
	case hl == nil:
		t.Error("no headless Service mcpgw-headless")
	case hl.Spec.ClusterIP != corev1.ClusterIPNone || hl.Spec.PublishNotReadyAddresses:
		t.Errorf("headless service clusterIP %q publishNotReadyAddresses %v, want None, false", hl.Spec.ClusterIP, hl.Spec.PublishNotReadyAddresses)
	case fmt.Sprint(hl.Spec.Selector) != fmt.Sprint(d.Spec.Selector.MatchLabels):
		t.Errorf("headless service selects %v, the pods are %v", hl.Spec.Selector, d.Spec.Selector.MatchLabels)
	case len(hl.Spec.Ports) != 1 || hl.Spec.Ports[0].Port != 8080:
		t.Errorf("headless service ports %+v, want the container's 8080", hl.Spec.Ports)
	}

	// Replicas forward to each other: the policy lets the release's own
	// pods in and out beside what the values allow.
	np := objs["NetworkPolicy/mcpgw"].(*networkingv1.NetworkPolicy)
	self := func(peers []networkingv1.NetworkPolicyPeer) bool {
		for _, p := range peers {
			if p.PodSelector != nil && fmt.Sprint(p.PodSelector.MatchLabels) == fmt.Sprint(d.Spec.Selector.MatchLabels) {
				return true
			}
		}
		return false
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 2 || !self(np.Spec.Ingress[0].From) {
		t.Errorf("network policy ingress %+v, want the ingress controller and the release's pods", np.Spec.Ingress)
	}
	if len(np.Spec.Egress) != 2 || !self(np.Spec.Egress[1].To) || np.Spec.Egress[1].Ports[0].Port.IntValue() != 8080 {
		t.Errorf("network policy egress %+v, want the database and the release's pods on 8080", np.Spec.Egress)
	}

	cfg := gatewayConfig(t, objs)
	st, _ := cfg["store"].(map[string]any)
	if st["driver"] != "postgres" || st["dsn"] != "${MCPGW_DATABASE_URL}" || st["max_conns"] != float64(8) {
		t.Errorf("config store %v, want driver postgres, dsn ${MCPGW_DATABASE_URL}, max_conns 8", cfg["store"])
	}
	if cl, _ := cfg["cluster"].(map[string]any); cl["enabled"] != true || cl["self_url"] != "http://${MCPGW_POD_IP}:8080" {
		t.Errorf("config cluster %v, want enabled, self_url http://${MCPGW_POD_IP}:8080", cfg["cluster"])
	}
	// The gateway itself takes it, with the variables the pod has.
	validateConfig(t, objs, "MCPGW_DATABASE_URL=postgres://mcpgw:pw@db:5432/mcpgw", "MCPGW_POD_IP=10.1.2.3", "SEARCH_API_KEY=k")

	// Without the HPA the Deployment runs replicaCount pods.
	manifest, err = render(t, "ci/postgres-values.yaml", map[string]any{"autoscaling": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatalf("render without the HPA: %v", err)
	}
	objs = decodeAll(t, manifest)
	d = objs["Deployment/mcpgw"].(*appsv1.Deployment)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v without an HPA, want 3", d.Spec.Replicas)
	}
	if objs["HorizontalPodAutoscaler/mcpgw"] != nil {
		t.Error("an HPA rendered with autoscaling.enabled false")
	}
}

// TestDatabaseSecret checks a DSN given as a value goes to the chart's
// own Secret and nowhere else: not the config, not an annotation.
func TestDatabaseSecret(t *testing.T) {
	const dsn = "postgres://mcpgw:hunter2-secret@db.example:5432/mcpgw?sslmode=require"
	manifest, err := render(t, "", map[string]any{"store": map[string]any{"driver": "postgres", "dsn": dsn}})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if n := strings.Count(manifest, "hunter2-secret"); n != 1 {
		t.Errorf("the DSN's password is in the manifest %d times, want once (the Secret)", n)
	}
	objs := decodeAll(t, manifest)
	s, _ := objs["Secret/mcpgw-database"].(*corev1.Secret)
	if s == nil || s.StringData["MCPGW_DATABASE_URL"] != dsn || len(s.StringData) != 1 {
		t.Fatalf("Secret/mcpgw-database %+v, want only MCPGW_DATABASE_URL", s)
	}
	c := objs["Deployment/mcpgw"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
	db := envOf(c, "MCPGW_DATABASE_URL")
	if db == nil || db.Value != "" || db.ValueFrom == nil || db.ValueFrom.SecretKeyRef == nil ||
		db.ValueFrom.SecretKeyRef.Name != "mcpgw-database" || db.ValueFrom.SecretKeyRef.Key != "MCPGW_DATABASE_URL" {
		t.Errorf("env MCPGW_DATABASE_URL %+v, want key MCPGW_DATABASE_URL of Secret mcpgw-database", db)
	}
	cfg := gatewayConfig(t, objs)
	if st, _ := cfg["store"].(map[string]any); st["dsn"] != "${MCPGW_DATABASE_URL}" {
		t.Errorf("config store %v", cfg["store"])
	}
	if st, _ := cfg["store"].(map[string]any); st["max_conns"] != nil {
		t.Errorf("config store.max_conns %v with store.maxConns 0, want the gateway's default", st["max_conns"])
	}
}

// TestPostgresOneReplicaVolume checks one PostgreSQL replica may keep
// data_dir (servers' logs, media) on a volume, as a SQLite one does.
func TestPostgresOneReplicaVolume(t *testing.T) {
	manifest, err := render(t, "", with(postgres(nil), map[string]any{"persistence": map[string]any{"enabled": true}}))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs := decodeAll(t, manifest)
	if objs["PersistentVolumeClaim/mcpgw-data"] == nil {
		t.Error("no PVC")
	}
	if d := objs["Deployment/mcpgw"].(*appsv1.Deployment); d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %q with a ReadWriteOnce volume, want Recreate", d.Spec.Strategy.Type)
	}
}

// TestSessionAffinity checks the ingress pins no client to a replica
// unless asked: any replica serves any request, and one that gets a
// session another holds forwards it there.
func TestSessionAffinity(t *testing.T) {
	tests := []struct {
		name  string
		extra map[string]any
		want  map[string]string // "" means absent
	}{
		{"default", nil, map[string]string{
			"nginx.ingress.kubernetes.io/affinity":            "",
			"nginx.ingress.kubernetes.io/session-cookie-name": "",
		}},
		{"cookie", map[string]any{"ingress": map[string]any{"sessionAffinity": true}}, map[string]string{
			"nginx.ingress.kubernetes.io/affinity":              "cookie",
			"nginx.ingress.kubernetes.io/affinity-mode":         "persistent",
			"nginx.ingress.kubernetes.io/session-cookie-name":   "mcpgw-affinity",
			"nginx.ingress.kubernetes.io/session-cookie-path":   "/",
			"nginx.ingress.kubernetes.io/session-cookie-secure": "true",
			// SSE's annotations stay.
			"nginx.ingress.kubernetes.io/proxy-buffering": "off",
		}},
		{"cookie, own name", map[string]any{"ingress": map[string]any{"sessionAffinity": true, "annotations": map[string]any{
			"nginx.ingress.kubernetes.io/session-cookie-name": "route",
		}}}, map[string]string{
			"nginx.ingress.kubernetes.io/affinity":            "cookie",
			"nginx.ingress.kubernetes.io/session-cookie-name": "route",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifest, err := render(t, "ci/postgres-values.yaml", tt.extra)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			ing := decodeAll(t, manifest)["Ingress/mcpgw"].(*networkingv1.Ingress)
			for k, want := range tt.want {
				got, ok := ing.Annotations[k]
				if want == "" && ok {
					t.Errorf("annotation %s = %q, want none", k, got)
				} else if want != "" && got != want {
					t.Errorf("annotation %s = %q, want %q", k, got, want)
				}
			}
		})
	}
}
