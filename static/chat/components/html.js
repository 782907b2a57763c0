// htm bound to Preact's h: the one template tag the components use.
import { h } from "preact";
import htm from "htm";

export const html = htm.bind(h);
