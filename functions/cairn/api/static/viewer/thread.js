// A mail's conversation: the received and sent mail linked by Message-ID,
// In-Reply-To and References, oldest first.

import { isReceivedMail, isSentMail } from "./summary.js";

function ids(event) {
  const data = event.data;
  // A received mail's `message_id` is the stored copy's; its header is `internet_message_id`.
  const own = isReceivedMail(event) ? data.internet_message_id : data.message_id;
  const linked = [data.in_reply_to, ...(Array.isArray(data.references) ? data.references : [])];
  return [own || `event:${event.id}`, ...linked].filter((id) => typeof id === "string" && id);
}

export function threadOf(event, events) {
  const mail = events.filter((each) => isReceivedMail(each) || isSentMail(each));
  const parent = new Map();
  const root = (id) => {
    while (parent.has(id) && parent.get(id) !== id) id = parent.get(id);
    return id;
  };
  for (const each of mail) {
    const [first, ...rest] = ids(each);
    for (const id of rest) {
      const [a, b] = [root(first), root(id)];
      if (a !== b) parent.set(b, a);
    }
  }
  const mine = root(ids(event)[0]);
  return mail.filter((each) => root(ids(each)[0]) === mine).sort((a, b) => a.sequence - b.sequence);
}
