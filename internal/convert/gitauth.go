package convert

import (
	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// Stackpilot reads Git credentials from one Secret with fixed keys
// (username and password, bearerToken, or identity and known_hosts); PKO
// names a Secret key (or a literal) per credential. Literal credentials go to
// a generated Secret with Stackpilot's keys; Secret ones carry over when the
// keys already match, else the warning says which keys to add.

func (s *stackConv) convertGitAuth() {
	git := s.out.Spec.Source.Git
	var legacy string
	if s.take("gitAuthSecret", &legacy) && legacy != "" {
		git.SecretRef = &v1alpha1.LocalObjectReference{Name: legacy}
		s.warn("spec.gitAuthSecret", "carried over as spec.source.git.secretRef, but Stackpilot reads keys username and password (or identity and known_hosts), not PKO's accessToken or sshPrivateKey: for a token add username: git and password: <token> to Secret %s", legacy)
	}
	var auth pkoGitAuth
	if !s.take("gitAuth", &auth) {
		return
	}
	switch {
	case auth.BasicAuth != nil:
		s.gitCredentials("spec.gitAuth.basicAuth", map[string]pkoResourceRef{
			"username": auth.BasicAuth.UserName, "password": auth.BasicAuth.Password})
	case auth.AccessToken != nil:
		// PKO sends a token as the password of user "git".
		if auth.AccessToken.Type == refLiteral && auth.AccessToken.Literal != nil {
			s.gitCredentials("spec.gitAuth.accessToken", map[string]pkoResourceRef{
				"username": {Type: refLiteral, Literal: &pkoLiteral{Value: "git"}}, "password": *auth.AccessToken})
			return
		}
		if name := refSecretName(*auth.AccessToken); name != "" {
			git.SecretRef = &v1alpha1.LocalObjectReference{Name: name}
		}
		s.warn("spec.gitAuth.accessToken", "Stackpilot sends a token as HTTP basic auth from keys username and password of one Secret: add username: git and password: <the token> to %s (spec.source.git.secretRef)", secretOrPlaceholder(refSecretName(*auth.AccessToken)))
	case auth.SSHAuth != nil:
		if name := refSecretName(auth.SSHAuth.SSHPrivateKey); name != "" {
			git.SecretRef = &v1alpha1.LocalObjectReference{Name: name}
		}
		s.warn("spec.gitAuth.sshAuth", "Stackpilot reads an SSH key from keys identity (and password for its passphrase) and checks the server against known_hosts, which PKO did not: add identity and known_hosts (ssh-keyscan <host>) to %s (spec.source.git.secretRef)", secretOrPlaceholder(refSecretName(auth.SSHAuth.SSHPrivateKey)))
	case len(auth.GitHubApp) > 0:
		s.warn("spec.gitAuth.githubApp", "left out: Stackpilot has no GitHub App authentication; put an installation or personal access token in a Secret as username: git and password: <token> and set spec.source.git.secretRef")
	}
}

// gitCredentials carries credentials over when Stackpilot can read them as
// they are: all literal (a generated Secret), or all in one Secret under
// Stackpilot's key names.
func (s *stackConv) gitCredentials(field string, refs map[string]pkoResourceRef) {
	git := s.out.Spec.Source.Git
	literals := map[string]string{}
	secrets := map[string]bool{}
	keysMatch := true
	for key, ref := range refs {
		switch {
		case ref.Type == refLiteral && ref.Literal != nil:
			literals[key] = ref.Literal.Value
		case ref.Type == refSecret && ref.Secret != nil:
			secrets[ref.Secret.Name] = true
			keysMatch = keysMatch && ref.Secret.Key == key
		default:
			s.warn(field, "%s", unreadableRef(ref))
			return
		}
	}
	switch {
	case len(literals) == len(refs):
		name := gitSecretName(s.meta.Name)
		git.SecretRef = &v1alpha1.LocalObjectReference{Name: name}
		s.c.res.Objects = append(s.c.res.Objects, s.literalSecret(name, literals))
	case len(secrets) == 1 && len(literals) == 0:
		for name := range secrets {
			git.SecretRef = &v1alpha1.LocalObjectReference{Name: name}
			if !keysMatch {
				s.warn(field, "Stackpilot reads keys username and password of Secret %s (spec.source.git.secretRef); add them with the values of the keys PKO named", name)
			}
		}
	default:
		s.warn(field, "left out: Stackpilot reads username and password from one Secret; put both in one Secret under those keys and set spec.source.git.secretRef")
	}
}

func refSecretName(ref pkoResourceRef) string {
	if ref.Type == refSecret && ref.Secret != nil {
		return ref.Secret.Name
	}
	return ""
}

// secretOrPlaceholder names a Secret in a warning, or says to make one.
func secretOrPlaceholder(name string) string {
	if name == "" {
		return "a new Secret"
	}
	return "Secret " + name
}
