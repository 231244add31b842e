// Package catalog is the e2b surface's view of the templates builds
// published: each tag of a template is its own promoted template on
// sandboxd, so the catalog stores nothing and every replica reads the
// same templates off the nodes, cached for a moment and shared between
// concurrent lookups. It also holds the rules of a template reference
// (ValidTemplateID) that a create, a build's base, a list filter and the
// alias file are held to before anything reaches a node.
package catalog
