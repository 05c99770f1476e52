"""Video front end of Embodied-R: decoding by timestamp (``decode``) and key-frame selection
(``keyframes``). Nothing is imported here, so ``import embodied_r.video`` stays instant."""
