// One table view kept live over the public WebSocket /v1/live: subscribe, take updates (each a
// full answer), move to another view, reconnect with a backoff after the connection drops.

export class LiveView {
  constructor({ onUpdate, onError, onState }) {
    this.onUpdate = onUpdate;
    this.onError = onError;
    this.onState = onState;
    this.view = null;
    this.ids = 0;
    this.asked = null; // id of the subscribe in flight for this.view
    this.sub = null;   // its subscription, once subscribed
    this.socket = null;
    this.backoff = 250;
    this.connect();
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/v1/live`);
    this.socket = socket;
    this.onState("connecting");
    socket.addEventListener("open", () => {
      this.backoff = 250;
      this.onState("live");
      if (this.view) this.subscribe();
    });
    socket.addEventListener("message", (message) => this.receive(JSON.parse(message.data)));
    socket.addEventListener("close", () => {
      this.sub = null;
      this.asked = null;
      this.onState("down");
      setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 5000);
    });
  }

  send(frame) {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(frame));
  }

  watch(view) {
    if (this.sub !== null) this.send({ op: "unsubscribe", id: ++this.ids, sub: this.sub });
    this.sub = null;
    this.view = view;
    this.subscribe();
  }

  subscribe() {
    this.asked = ++this.ids;
    this.send({ op: "subscribe", id: this.asked, view: this.view });
  }

  receive(frame) {
    if (frame.op === "subscribed") {
      if (frame.id === this.asked) this.sub = frame.sub;
      else this.send({ op: "unsubscribe", id: ++this.ids, sub: frame.sub }); // an older view's
    } else if (frame.op === "update") {
      if (frame.sub === this.sub) this.onUpdate(frame);
    } else if (frame.op === "error") {
      if ((frame.id !== null && frame.id === this.asked) || (frame.sub !== undefined && frame.sub === this.sub)) {
        this.sub = null;
        this.onError(frame);
      }
    }
  }
}
