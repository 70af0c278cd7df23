FROM debian AS stage
RUN echo built-in-stage > /out && mkdir /seed && echo seed-content > /seed/f

FROM debian
RUN --mount=type=cache,target=/var/cache/demo sh -c 'echo x >> /var/cache/demo/count; wc -l < /var/cache/demo/count > /seen'
RUN --mount=type=tmpfs,target=/scratch sh -c 'echo hi > /scratch/f && cat /scratch/f > /tmpfs-saw'
RUN --mount=type=bind,source=req.txt,target=/req cat /req > /from-bind
RUN --mount=type=bind,target=/ctx sh -c 'touch /ctx/new 2>/dev/null && echo writable || echo read-only' > /bind-rw
RUN --mount=type=bind,from=stage,source=/out,target=/o cat /o > /from-stage
RUN --mount=type=secret,id=tok --mount=type=secret,id=ev,target=/ev \
    sh -c 'cat /run/secrets/tok /ev | sha256sum > /secret-sum'
RUN --network=none cat /proc/net/dev > /net-dev
RUN --mount=type=bind,target=/ctx,rw sh -c 'echo scribbled > /ctx/req.txt && cat /ctx/req.txt > /bind-rw-wrote'
RUN --mount=type=cache,id=seeded,target=/seeded,from=stage,source=/seed sh -c 'cat /seeded/f > /seeded-saw'
