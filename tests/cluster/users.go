package cluster

import (
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The users every cluster knows. More can be added with WithUser.
const (
	// AdminUser is in system:masters: every request is allowed.
	AdminUser = "admin"
	// UnprivilegedUser has no role bindings, so RBAC forbids it everything
	// but discovery until a test grants it more.
	UnprivilegedUser = "alice"
	// UnprivilegedGroup is UnprivilegedUser's one group, for tests that bind
	// roles to a group.
	UnprivilegedGroup = "developers"
)

// user is one identity in the kube-apiserver's --token-auth-file.
type user struct {
	name   string
	groups []string
	token  string
}

// userTable is the cluster's static token authenticator content.
type userTable []user

func defaultUsers() userTable {
	return userTable{
		{name: AdminUser, groups: []string{"system:masters"}},
		{name: UnprivilegedUser, groups: []string{UnprivilegedGroup}},
	}
}

// add appends name, replacing an earlier entry of the same name.
func (t userTable) add(name string, groups []string) userTable {
	t = slices.DeleteFunc(t, func(u user) bool { return u.name == name })
	return append(t, user{name: name, groups: slices.Clone(groups)})
}

func (t userTable) lookup(name string) (user, bool) {
	i := slices.IndexFunc(t, func(u user) bool { return u.name == name })
	if i < 0 {
		return user{}, false
	}
	return t[i], true
}

// issueTokens gives every user a fresh random bearer token.
func (t userTable) issueTokens() error {
	for i := range t {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("generate token for %s: %w", t[i].name, err)
		}
		t[i].token = hex.EncodeToString(b)
	}
	return nil
}

// write stores the table as a --token-auth-file (token,user,uid,"groups")
// under dir and returns its path.
func (t userTable) write(dir string) (string, error) {
	var b strings.Builder
	w := csv.NewWriter(&b)
	for _, u := range t {
		if err := w.Write([]string{u.token, u.name, u.name, strings.Join(u.groups, ",")}); err != nil {
			return "", fmt.Errorf("encode token file: %w", err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return "", fmt.Errorf("encode token file: %w", err)
	}
	path := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("write token file: %w", err)
	}
	return path, nil
}
