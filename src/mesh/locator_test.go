package mesh_test

import (
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/mesh"
)

// The data plane takes the mesh's Locator; the mesh itself needs nothing
// of the data plane, so the check lives here rather than in its code.
var _ envdproxy.Locator = (*mesh.Locator)(nil)
