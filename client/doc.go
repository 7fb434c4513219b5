// Package client reads and writes Kubernetes objects with one generic type,
// Client[T], for every resource: the built-in types of k8s.io/api, custom
// types registered in a Scheme, unstructured objects of any resource
// (the dynamic client) and metadata-only objects. There is no generated
// code.
//
// # Getting started
//
//	rc, _ := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
//	pods, err := client.For[corev1.Pod](rc, client.Options{})
//	pod, err := pods.Namespace("default").Get(ctx, "web-0", metav1.GetOptions{})
//	pod, ok, err := client.Optional(pods.Namespace("default").Get(ctx, "web-1", metav1.GetOptions{}))
//
// The dynamic client is the same type with unstructured objects, told which
// resource to use (the Mapper from package discovery finds it by name):
//
//	m, _ := mapper.ResourceFor(ctx, "widgets.example.com")
//	widgets, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: m})
//
// And the metadata-only client, for caches that need names, labels and
// owners but not whole objects:
//
//	metas, _ := client.For[metav1.PartialObjectMetadata](rc, client.Options{Resource: m})
//
// # Live reads only
//
// Every method is a request to the API server. Reads from an informer's
// cache go through a [Reader] (a cache.CachedClient, or the manager's
// cached clients), a different type, so that a stale read is never a
// surprise.
//
// # One vocabulary, two ways to address an object
//
// A [Client] is one resource in one namespace, as client-go's typed
// clients and kube-rs's Api are: [Client.Namespace] picks the namespace,
// and Get, Patch and Delete name the object. A [Reader] and a [Writer],
// what reconcilers take, span namespaces: reads name the namespace and
// the object, writes take the object, whose namespace and name say which
// one. The rest of each call is the same on both: the same options, the
// same patch types and subresources, and the same errors. In particular
// every Get, live or cached, reports an absent object with an error for
// which apierrors.IsNotFound is true; [Optional] turns it into ok=false
// where absent is an answer, and [IgnoreNotFound] drops it. The
// Client's [Client.ReadWriter] is a ReadWriter that reads live.
//
// # Verbs
//
// Get, List, ListAll and Pages
// (following continue tokens, and starting again when a token expires),
// Watch, Create, Update, UpdateStatus, Patch (JSON patch, merge patch,
// strategic merge patch, apply), Apply and ApplyStatus (server-side apply
// of the fields a typed object sets, with a field manager, set once in
// Options.FieldOwner, and force; see [Client.Apply] and [Applier]), Delete (propagation policy,
// preconditions, grace period) and DeleteCollection. Subresources: status
// (UpdateStatus, ApplyStatus, Patch with "status"), scale ([Scaler]),
// eviction ([Evict]), binding ([Bind]), logs ([Logs]), and exec, attach
// and port-forward ([Exec], [Attach], [PortForward]).
//
// # Exec, attach and port-forward
//
// [Exec] runs a command in a container and copies its standard input,
// output and error, with a terminal and its resizes if asked; it returns
// an [*ExitError] carrying the command's exit code when that is not 0.
// [Attach] does the same with a container's main process. [PortForward]
// listens on local ports and forwards each connection to a port of the
// Pod; [PortForwarder.Dial] opens one without a listener:
//
//	err := client.Exec(ctx, pods, "web-0", client.ExecOptions{
//		Command: []string{"sh", "-c", "ls /data"}, Stdout: os.Stdout, Stderr: os.Stderr})
//	var exit *client.ExitError
//	if errors.As(err, &exit) { os.Exit(exit.Code) }
//
//	pf, err := client.PortForward(ctx, pods, "web-0", client.PortForwardOptions{Ports: []string{"8080:80"}})
//	defer pf.Close()
//
// The streams travel over WebSocket, which recent API servers speak for
// all three: v5.channel.k8s.io for exec and attach (v4 where the
// server offers only that, which cannot close the command's standard
// input), and SPDY/3.1 tunnelled in WebSocket messages for port-forward.
// Where the server refuses the WebSocket upgrade, they go over SPDY/3.1
// instead; [StreamProtocol] picks one of the two. Either way the
// connection is made by the [rest.Client], with its TLS settings, proxy
// and credentials. A refused upgrade is an [*UpgradeError] carrying the
// server's Status (apierrors.IsNotFound works on it), and a container
// the Pod does not have is a [*ContainerNotFoundError].
//
// # Conflicts
//
// Update is conditional on the object's resourceVersion; a stale one fails
// with 409 Conflict. [RetryOnConflict] re-runs a read-modify-write, and
// [Client.Mutate] is that loop in one call.
//
// # Objects read from a cache
//
// Loom's informers share identical parts (containers, label maps,
// managed fields) between the objects they cache, so a cached object
// changed in place changes others with it. Create, Update, UpdateStatus
// and Apply refuse an object holding such a part that was changed since
// it was decoded, with a [*SharedChangedError] ([ErrSharedChanged]) that
// names where it is. They also look at the object of the same name that
// an informer of the process caches: if a part of it was changed in
// place and the object written holds the same value there (a copy made
// after the change), the write is refused too (InCache set). Change a
// DeepCopy instead.
//
// # Where objects live
//
// For finds the resource of a built-in type in a table generated from the
// discovery of the kube-apiserver version Loom tests against (and checked
// against it by a test). Custom types need Options.Scheme, to name their
// kind, and Options.Mapper or Options.Resource, to find their resource.
//
// # Coming from client-go
//
// docs/migrating-from-client-go.md maps clientset calls to these.
package client
