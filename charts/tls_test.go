package charts_test

import (
	"strings"
	"testing"
)

// TestTLS renders the chart with TLS and OAuth2 on: every service gets
// the certificate Secret mounted and the TLS flags, cgw and ocp call their
// peers over mTLS naming the peer Service, the probes fit the client
// authentication, and only the CGW gets the token keys.
func TestTLS(t *testing.T) {
	helmBin(t)
	for _, clientAuth := range []string{"require", "request"} {
		t.Run(clientAuth, func(t *testing.T) {
			o := renderDecoded(t, chfModels[0], "--set", "tls.enabled=true", "--set", "tls.secretName=chf-certs",
				"--set", "tls.clientAuth="+clientAuth, "--set", "oauth2.keysSecret=nrf-keys", "--set", "oauth2.audience=CHF")
			for c, peer := range map[string]string{"cgw": "ocp", "ocp": "abm", "abm": ""} {
				spec := o.deployments[c].Spec.Template.Spec
				ctr := spec.Containers[0]
				for name, want := range map[string]string{
					"CHF_TLS_CERT": "/etc/chf/tls/tls.crt", "CHF_TLS_KEY": "/etc/chf/tls/tls.key",
					"CHF_TLS_CA": "/etc/chf/tls/ca.crt", "CHF_TLS_CLIENT_AUTH": clientAuth,
				} {
					if v, _ := envValue(ctr, name); v != want {
						t.Errorf("%s %s=%q, want %q", c, name, v, want)
					}
				}
				v, ok := envValue(ctr, "CHF_PEER_TLS")
				switch {
				case peer == "" && ok:
					t.Errorf("abm has CHF_PEER_TLS")
				case peer != "" && v != "true":
					t.Errorf("%s CHF_PEER_TLS=%q", c, v)
				case peer != "":
					sn, _ := envValue(ctr, "CHF_PEER_TLS_SERVER_NAME")
					if want := release + "-" + peer + "." + namespace + ".svc"; sn != want { // fullname = release (it contains "chf")
						t.Errorf("%s CHF_PEER_TLS_SERVER_NAME=%q, want the %s Service's name (%s)", c, sn, peer, want)
					}
				}
				var mounted bool
				for _, vol := range spec.Volumes {
					if vol.Name == "tls" && vol.Secret != nil && vol.Secret.SecretName == "chf-certs" {
						mounted = true
					}
				}
				if !mounted {
					t.Errorf("%s: Secret chf-certs not mounted", c)
				}
				rp := ctr.ReadinessProbe
				switch {
				case clientAuth == "require" && (rp.TCPSocket == nil || rp.HTTPGet != nil):
					t.Errorf("%s: readiness probe %+v, want a TCP check under mTLS", c, rp.ProbeHandler)
				case clientAuth != "require" && (rp.HTTPGet == nil || rp.HTTPGet.Scheme != "HTTPS"):
					t.Errorf("%s: readiness probe %+v, want an HTTPS GET", c, rp.ProbeHandler)
				}
				keys, hasKeys := envValue(ctr, "CHF_OAUTH2_KEYS")
				if (c == "cgw") != hasKeys || hasKeys && keys != "/etc/chf/oauth2/keys" {
					t.Errorf("%s CHF_OAUTH2_KEYS=%q (set %v)", c, keys, hasKeys)
				}
			}
		})
	}
	if _, err := render(t, chfModels[0], "--set", "tls.clientAuth=sometimes"); err == nil || !strings.Contains(err.Error(), "/tls/clientAuth") {
		t.Errorf("tls.clientAuth=sometimes: %v, want a schema error naming /tls/clientAuth", err)
	}
}
