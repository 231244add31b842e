package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// BuildClaim is the PersistentVolumeClaim the install's template builds
// keep their uploads on.
const BuildClaim = "e2b-builds"

// imageUser is the user the project's images run as (the chart's pods
// run as it too).
const imageUser = 65532

// createBuildStore makes the ReadWriteMany volume every sandbox-apiserver
// replica mounts for template builds (apiserver.e2b.builds.dir): on this
// one node a hostPath PersistentVolume, bound to BuildClaim in Namespace.
// A cluster of several nodes would use a networked ReadWriteMany class;
// what the chart sees is the claim either way.
func (s *Stack) createBuildStore(ctx context.Context) error {
	dir := filepath.Join(s.dir, "e2b-builds")
	if err := os.MkdirAll(dir, 0o770); err != nil {
		return err
	}
	if err := os.Chown(dir, imageUser, imageUser); err != nil {
		return fmt.Errorf("the build store's directory: %w", err)
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %[1]s-%[2]s
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: %[3]q, type: Directory}
  claimRef: {namespace: %[2]s, name: %[1]s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: %[1]s-%[2]s
  resources: {requests: {storage: 2Gi}}
`, BuildClaim, Namespace, dir)
	path := filepath.Join(s.dir, "build-store.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		return err
	}
	_, err := s.Kubectl(ctx, "apply", "-f", path)
	return err
}
