package main

// The replay server: answers GET /api/v1/pods (list, paginated by
// limit=500/continue, or whole) and its watches from the recorded corpus.
//
//   - A watch with sendInitialEvents=true gets the recorded streaming list
//     and then the recorded events when the server is in WatchList mode;
//     otherwise a 422 Invalid Status, as an API server with WatchList off
//     answers, so clients fall back to paginated lists.
//   - A watch from the list's resourceVersion gets the recorded events
//     (with holdEvents, once ReleaseEvents is called).
//   - Every watch is then held open until the client goes, or until
//     Relist is called: the held watch then gets an ERROR event with a 410
//     Expired Status, which makes any client relist. The relist gets the
//     second snapshot, in which every Pod changed; with sameRelist, the
//     first one again.

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type server struct {
	c          *corpus
	watchList  bool
	sameRelist bool // the relist serves the first snapshot again
	srv        *httptest.Server

	relist chan struct{}

	hold     bool          // the recorded events wait for ReleaseEvents
	events   chan struct{} // closed by ReleaseEvents
	released sync.Once

	mu       sync.Mutex
	lists    int // list requests answered (pages count one each)
	watches  int // watch requests answered with a stream
	streamed int // streaming lists served
	refused  int // streaming lists refused
	gone     atomic.Int64
	phase    atomic.Int32 // 1 once Relist was called: serve the second snapshot
	rewatch  atomic.Int64 // watches started after Relist: the relist is done
}

func (s *server) suffix() string {
	if s.phase.Load() == 1 && !s.sameRelist {
		return "-relist"
	}
	return ""
}

func newServer(c *corpus, watchList, sameRelist, holdEvents bool) *server {
	s := &server{c: c, watchList: watchList, sameRelist: sameRelist, relist: make(chan struct{}), hold: holdEvents, events: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *server) URL() string { return s.srv.URL }
func (s *server) Close()      { s.srv.CloseClientConnections(); s.srv.Close() }

// Relist makes the one held watch end with a 410 ERROR event.
// ReleaseEvents lets watches have the recorded events, when they were
// held (holdEvents).
func (s *server) ReleaseEvents() { s.released.Do(func() { close(s.events) }) }

func (s *server) Relist() { s.phase.Store(1); s.relist <- struct{}{} }

type serverStats struct{ Lists, Watches, Streamed, Refused int }

func (s *server) stats() serverStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return serverStats{s.lists, s.watches, s.streamed, s.refused}
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	path := "/api/v1/pods"
	if s.c.meta.Kind == "widgets" {
		path = widgetPath
	}
	if r.URL.Path != path || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	media := mediaJSON
	if strings.Contains(r.Header.Get("Accept"), mediaProtobuf) && s.c.meta.Kind != "widgets" {
		media = mediaProtobuf // custom resources are served as JSON only
	}
	q := r.URL.Query()
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		s.serveWatch(w, r, media)
		return
	}
	var body []byte
	switch limit := q.Get("limit"); {
	case limit == "" || limit == "0":
		body = s.c.get(media, "list-all"+s.suffix())
	case limit == strconv.Itoa(pageSize):
		page := 0
		if cont := q.Get("continue"); cont != "" {
			p, err := strconv.Atoi(strings.TrimPrefix(cont, "page-"))
			if err != nil || !strings.HasPrefix(cont, "page-") {
				s.status(w, media, apierrors.NewBadRequest("bad continue token"))
				return
			}
			page = p
		}
		body = s.c.get(media, "list-page-"+strconv.Itoa(page)+s.suffix())
	default:
		s.status(w, media, apierrors.NewBadRequest("replay server serves limit=500 or no limit only"))
		return
	}
	s.mu.Lock()
	s.lists++
	s.mu.Unlock()
	w.Header().Set("Content-Type", media)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func (s *server) serveWatch(w http.ResponseWriter, r *http.Request, media string) {
	q := r.URL.Query()
	initial := q.Get("sendInitialEvents") == "true"
	if initial && !s.watchList {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		s.status(w, media, apierrors.NewInvalid(schema.GroupKind{Kind: "ListOptions"}, "", nil))
		return
	}
	s.mu.Lock()
	s.watches++
	if initial {
		s.streamed++
	}
	s.mu.Unlock()
	if s.phase.Load() == 1 {
		s.rewatch.Add(1)
	}
	ct := media
	if media == mediaProtobuf {
		ct += ";stream=watch"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	f.Flush()
	if initial {
		_, _ = w.Write(s.c.get(media, "watch-initial"+s.suffix()))
	}
	if s.phase.Load() == 0 && (initial || q.Get("resourceVersion") == listRV()) {
		if s.hold {
			f.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-s.events:
			}
		}
		_, _ = w.Write(s.c.get(media, "watch-events"))
	}
	f.Flush()
	select {
	case <-r.Context().Done():
	case <-s.relist:
		s.gone.Add(1)
		_, _ = w.Write(s.c.get(media, "watch-gone"))
		f.Flush()
	}
}

func (s *server) status(w http.ResponseWriter, media string, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	cf := codecs()
	info, _ := runtime.SerializerInfoForMediaType(cf.SupportedMediaTypes(), media)
	b, e := runtime.Encode(cf.EncoderForVersion(info.Serializer, schema.GroupVersion{Version: "v1"}), &st)
	if e != nil {
		http.Error(w, e.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", media)
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(b)
}
